import type { MediaProcessor } from "@vod/core";
import { Effect } from "effect";

const deferred = () => {
  let resolve = () => {};
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

/**
 * Holds every run that adds renditions to a playable asset (`shared: false`) until released:
 * the test sees the asset between its first rendition and the others, whatever the timing.
 */
export const gatedProcessor = (inner: MediaProcessor) => {
  let reached = deferred();
  let release = deferred();
  const processor: MediaProcessor = {
    probe: (input) => inner.probe(input),
    plan: (source, ladder) => inner.plan(source, ladder),
    package: (input, source, renditions, emit, options) =>
      options?.shared === false
        ? Effect.flatMap(
            Effect.promise(() => {
              reached.resolve();
              return release.promise;
            }),
            () => inner.package(input, source, renditions, emit, options),
          )
        : inner.package(input, source, renditions, emit, options),
  };
  return {
    processor,
    /** Resolves once a run adding renditions is held. */
    held: () => reached.promise,
    /** Lets the held run go on, and holds the next one. */
    open: () => {
      const current = release;
      reached = deferred();
      release = deferred();
      current.resolve();
    },
  };
};
