import { webVttTextTrackReader } from "@vod/adapter-webvtt";
import { Effect, Either } from "effect";
import { describe, expect, it } from "vitest";

const reader = webVttTextTrackReader();
const read = (content: string) => Effect.runPromise(Effect.either(reader.read(content)));

describe("webVttTextTrackReader", () => {
  it("reads WebVTT cues with identifiers and settings, leaving NOTE and STYLE blocks out", async () => {
    const read1 = await read(
      "\uFEFFWEBVTT - captions\r\n\r\nNOTE a comment\r\n\r\nSTYLE\r\n::cue { color: red }\r\n\r\nintro\r\n00:01.000 --> 00:03.500 align:start line:10%\r\nHello <b>there</b>\r\n\r\n01:00:04.000 --> 01:00:06.000\r\nSecond\r\ntwo lines\r\n",
    );
    expect(read1).toEqual(
      Either.right([
        {
          startMs: 1000,
          endMs: 3500,
          block: "intro\n00:00:01.000 --> 00:00:03.500 align:start line:10%\nHello <b>there</b>",
        },
        { startMs: 3_604_000, endMs: 3_606_000, block: "01:00:04.000 --> 01:00:06.000\nSecond\ntwo lines" },
      ]),
    );
  });

  it("converts SRT to WebVTT cue blocks (comma times, numbered cues, `-->` in text escaped)", async () => {
    expect(
      await read(
        "1\n00:00:01,000 --> 00:00:02,500\nHello\n\n2\n00:00:03,250 --> 00:00:04,000 X1:10 X2:20\nA --> B\n",
      ),
    ).toEqual(
      Either.right([
        { startMs: 1000, endMs: 2500, block: "1\n00:00:01.000 --> 00:00:02.500\nHello" },
        { startMs: 3250, endMs: 4000, block: "2\n00:00:03.250 --> 00:00:04.000\nA --&gt; B" },
      ]),
    );
  });

  it.each([
    [
      "a bad WebVTT timestamp",
      "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nok\n\n00:00:0x.000 --> 00:00:05.000\nbad\n",
      6,
    ],
    ["an unknown WebVTT cue setting", "WEBVTT\n\n00:00:01.000 --> 00:00:03.000 foo:bar\nok\n", 3],
    ["a WebVTT cue ending before it starts", "WEBVTT\n\nx\n00:00:05.000 --> 00:00:03.000\nok\n", 4],
    [
      "an SRT arrow without its second dash",
      "1\n00:00:01,000 --> 00:00:03,000\nok\n\n2\n00:00:04,000 -> 00:00:05,000\nbad\n",
      5,
    ],
    ["text that is neither", "hello world\nthis is not captions\n", 1],
    ["a near-miss signature, read as SRT", "WEBVTTX\n\n00:00:01.000 --> 00:00:03.000\nok\n", 1],
    ["an empty file", "", 1],
  ])("refuses %s, naming the line", async (_, content, line) => {
    const result = await read(content);
    expect(Either.isLeft(result) && result.left.line).toBe(line);
    expect(Either.isLeft(result) && result.left.message.length).toBeGreaterThan(5);
  });

  it("accepts a WebVTT file with no cue", async () => {
    expect(await read("WEBVTT\n")).toEqual(Either.right([]));
  });
});
