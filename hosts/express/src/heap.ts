import { setFlagsFromString } from "node:v8";

/**
 * V8 counts new external memory (the buffer of each chunk read from a socket) against the old
 * generation until the next full GC, and part PUTs make more of it between two scavenges than
 * the headroom V8 leaves when it lets the factor fall and shrinks an idle heap: an upload then
 * ran full GC after full GC. A factor of 3, within the range V8 picks by itself, leaves room
 * for an upload's short-lived buffers; an idle heap is still shrunk (bench/upload-gc.mjs).
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
 * old copies then held young objects through every scavenge until the next full GC. It only
 * moves where new objects are born; the `vod` CLI calls it at start, an embedding process
 * decides for itself.
 */
export const tuneHeapForRequests = (): void => {
  setFlagsFromString("--no-allocation-site-pretenuring");
};
