import { ffmpegAdapters } from "@vod/adapter-ffmpeg";
import type { MediaProcessor } from "@vod/core";
import { Container } from "inversify";
import { describe, expect, it } from "vitest";

describe("ffmpegAdapters", () => {
  it("binds the MediaProcessor port, finding the tools only when it is first asked for", () => {
    const container = new Container();
    container.load(ffmpegAdapters({ ffmpegPath: "/nonexistent/ffmpeg" }));
    expect(() => container.get(Symbol.for("vod.MediaProcessor"))).toThrow(/ffmpegPath/);

    const working = new Container();
    working.load(ffmpegAdapters());
    const processor = working.get<MediaProcessor>(Symbol.for("vod.MediaProcessor"));
    expect(typeof processor.probe).toBe("function");
    expect(typeof processor.package).toBe("function");
    expect(working.get(Symbol.for("vod.MediaProcessor"))).toBe(processor);
  });
});
