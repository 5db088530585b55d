import { setFlagsFromString } from "node:v8";

/**
 * V8 (measured on Node 20) counts new external memory, such as the 64 KiB buffer of each chunk
 * read from a socket, against the old generation's limit until the next full GC. Between two scavenges,
 * part PUTs allocate ~32 MB of such buffers, all short-lived. The heap's own headroom after a
 * full GC is often less than that: V8's growing factor can fall to 1.1, and the memory reducer
 * shrinks the heap after a pause. A following upload then set off a full GC every ~25 MB: 40-60
 * per GiB, 1.5-2 CPU seconds, part PUTs at 0.4-0.7 of the bare pipe (bench/upload-gc.mjs).
 * A factor of 3 leaves ~60 MB of headroom over the host's ~30 MB heap, and the full GCs during an
 * upload went to none. 3 is within the range V8 picks by itself (1.1-4); an idle heap is still
 * shrunk.
 */
export const DEFAULT_HEAP_GROWING_PERCENT = 200;

/**
 * Pins V8's heap growing factor at 1 + percent/100 for the whole process. The `vod` CLI calls it
 * at start (VOD_HEAP_GROWING_PERCENT); `startHost` does not, as the process belongs to whoever
 * embeds it: a process that serves the media app's part uploads should call it once, early.
 */
export const tuneHeapForStreaming = (percent: number = DEFAULT_HEAP_GROWING_PERCENT): void => {
  if (!Number.isInteger(percent) || percent < 1 || percent > 1000)
    throw new RangeError(`heap growing percent must be an integer from 1 to 1000, got ${percent}`);
  setFlagsFromString(`--heap-growing-percent=${percent}`);
};

/**
 * Turns off V8's allocation-site pretenuring for the whole process. A site whose objects were
 * seen to survive is made to allocate straight into the old generation; on the API's list path
 * that picked the sites of request-scoped data (a database row's text, its parsed rows), whose
 * old copies then held young objects through every scavenge until the next full GC. Measured on
 * GET /v1/assets?limit=50 (server set, --trace-gc-nvp, alternating runs): bytes per request that
 * survived a scavenge 16.4 -> 7.5 KB, scavenge time 47-54 -> 33-34 µs per request, host CPU
 * 374-439 -> 331-337 µs per request (bench/README.md). It only moves where new objects are
 * born; the `vod` CLI calls it at start, an embedding process decides for itself.
 */
export const tuneHeapForRequests = (): void => {
  setFlagsFromString("--no-allocation-site-pretenuring");
};
