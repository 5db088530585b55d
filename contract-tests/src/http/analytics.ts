import { beforeAll, describe, expect, it } from "vitest";
import {
  type Credential,
  createApiKey,
  createAsset,
  credentialOptions,
  expectError,
  expectInvalidFields,
  expectStatus,
  type MakeHttpSubject,
  sendTo,
  sharedSubject,
  signUp,
} from "./client.js";
import { type CreatedPlayback, untilReady, uploadAndComplete } from "./playback.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface Beacon {
  readonly event: string;
  readonly ts_ms: number;
  readonly rendition?: string;
  readonly startup_ms?: number;
}

/**
 * A view as a test plays it: when its first batch reaches the service (minutes after the start
 * of the suite's first UTC day), its batches, and the values the definitions in
 * docs/analytics.md give for them, worked out by hand.
 */
interface PlayedView {
  readonly name: string;
  readonly asset: "a" | "b";
  readonly at: number;
  readonly playerVersion?: string;
  /** Batches, sent in order, each after the previous one was stored. */
  readonly batches: ReadonlyArray<ReadonlyArray<Beacon>>;
  readonly playingMs: number;
  readonly stallMs: number;
  readonly stalls: number;
  readonly startupMs: number | null;
  readonly failed: boolean;
  readonly exited: boolean;
  readonly rendition: string | null;
}

const ev = (event: string, ts_ms: number, more: Omit<Beacon, "event" | "ts_ms"> = {}): Beacon => ({
  event,
  ts_ms,
  ...more,
});

const VIEWS: ReadonlyArray<PlayedView> = [
  {
    // Plays, stalls once, pauses, plays again to the end; split over two batches.
    name: "v1",
    asset: "a",
    at: 10 * 60_000,
    playerVersion: "p1",
    batches: [
      [
        ev("play", 0),
        ev("first_frame", 500, { startup_ms: 480, rendition: "720p" }),
        ev("heartbeat", 10_500),
        ev("stall_start", 20_500),
      ],
      [
        ev("stall_end", 22_500),
        ev("seek", 25_000),
        ev("heartbeat", 30_500),
        ev("pause", 40_500),
        ev("play", 50_500),
        ev("rendition_change", 55_000, { rendition: "1080p" }),
        ev("ended", 60_500),
      ],
    ],
    playingMs: 48_000,
    stallMs: 2_000,
    stalls: 1,
    startupMs: 480,
    failed: false,
    exited: false,
    rendition: "720p",
  },
  {
    // Startup from the player clock (no startup_ms); fails, and never plays after the error.
    name: "v2",
    asset: "a",
    at: 11 * 60_000,
    playerVersion: "p1",
    batches: [
      [ev("play", 1_000), ev("first_frame", 2_200, { rendition: "360p" }), ev("heartbeat", 32_200)],
      [ev("error", 42_200), ev("heartbeat", 52_200)],
    ],
    playingMs: 40_000,
    stallMs: 0,
    stalls: 0,
    startupMs: 1_200,
    failed: true,
    exited: false,
    rendition: "360p",
  },
  {
    // Asks to play and leaves before a first frame; a stall before the first frame is startup.
    name: "v3",
    asset: "a",
    at: 12 * 60_000,
    playerVersion: "p2",
    batches: [[ev("play", 0), ev("stall_start", 100), ev("heartbeat", 5_000)]],
    playingMs: 0,
    stallMs: 0,
    stalls: 0,
    startupMs: null,
    failed: false,
    exited: true,
    rendition: null,
  },
  {
    // An error, then playing again: not a failure.
    name: "v4",
    asset: "a",
    at: HOUR + 5 * 60_000,
    playerVersion: "p2",
    batches: [
      [ev("play", 0), ev("first_frame", 300, { startup_ms: 300, rendition: "720p" }), ev("error", 10_300)],
      [ev("play", 20_300), ev("heartbeat", 30_300), ev("ended", 40_300)],
    ],
    playingMs: 30_000,
    stallMs: 0,
    stalls: 0,
    startupMs: 300,
    failed: false,
    exited: false,
    rendition: "720p",
  },
  {
    // Two stalls, no player_version.
    name: "v5",
    asset: "b",
    at: 20 * 60_000,
    batches: [
      [
        ev("play", 0),
        ev("first_frame", 2_000, { startup_ms: 2_000, rendition: "1080p" }),
        ev("stall_start", 12_000),
        ev("stall_end", 15_000),
      ],
      [ev("stall_start", 25_000), ev("heartbeat", 25_500), ev("stall_end", 26_000), ev("heartbeat", 46_000)],
    ],
    playingMs: 40_000,
    stallMs: 4_000,
    stalls: 2,
    startupMs: 2_000,
    failed: false,
    exited: false,
    rendition: "1080p",
  },
  {
    // The next day.
    name: "v6",
    asset: "b",
    at: DAY + 2 * HOUR + 60_000,
    playerVersion: "p1",
    batches: [
      [
        ev("play", 0),
        ev("first_frame", 800, { startup_ms: 800, rendition: "720p" }),
        ev("heartbeat", 60_800),
      ],
    ],
    playingMs: 60_000,
    stallMs: 0,
    stalls: 0,
    startupMs: 800,
    failed: false,
    exited: false,
    rendition: "720p",
  },
];

type Metric =
  | "views"
  | "playing_time_ms"
  | "startup_time_ms"
  | "rebuffer_percentage"
  | "rebuffer_frequency"
  | "playback_failure_percentage"
  | "exits_before_video_start";

const METRICS: ReadonlyArray<Metric> = [
  "views",
  "playing_time_ms",
  "startup_time_ms",
  "rebuffer_percentage",
  "rebuffer_frequency",
  "playback_failure_percentage",
  "exits_before_video_start",
];

type Value = number | { p50: number; p90: number; p95: number } | null;

const sum = (views: ReadonlyArray<PlayedView>, f: (v: PlayedView) => number) =>
  views.reduce((total, v) => total + f(v), 0);

const rank = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1];

/** The metric over views, from the definitions (DECISIONS "Playback analytics"). */
const expected = (metric: Metric, views: ReadonlyArray<PlayedView>): Value => {
  const playing = sum(views, (v) => v.playingMs);
  const stall = sum(views, (v) => v.stallMs);
  switch (metric) {
    case "views":
      return views.length;
    case "playing_time_ms":
      return playing;
    case "exits_before_video_start":
      return views.filter((v) => v.exited).length;
    case "playback_failure_percentage":
      return views.length === 0 ? null : (100 * views.filter((v) => v.failed).length) / views.length;
    case "rebuffer_percentage":
      return playing + stall === 0 ? null : (100 * stall) / (playing + stall);
    case "rebuffer_frequency":
      return playing === 0 ? null : sum(views, (v) => v.stalls) / (playing / 60_000);
    case "startup_time_ms": {
      const sorted = views
        .map((v) => v.startupMs)
        .filter((s): s is number => s !== null)
        .sort((a, b) => a - b);
      if (sorted.length === 0) return null;
      return { p50: rank(sorted, 0.5) ?? 0, p90: rank(sorted, 0.9) ?? 0, p95: rank(sorted, 0.95) ?? 0 };
    }
  }
};

const within1Percent = (actual: unknown, wanted: number) => {
  expect(typeof actual).toBe("number");
  expect(Math.abs((actual as number) - wanted)).toBeLessThanOrEqual(Math.abs(wanted) * 0.01);
};

/**
 * Counts exactly; ratios within 1%; startup percentiles within 1% of the exact nearest rank
 * (they come from a histogram of startup times, as Mux's do).
 */
const expectValue = (actual: Value, wanted: Value, metric: Metric) => {
  if (wanted !== null && typeof wanted === "object") {
    expect(actual).toEqual({ p50: expect.any(Number), p90: expect.any(Number), p95: expect.any(Number) });
    for (const p of ["p50", "p90", "p95"] as const)
      within1Percent((actual as Record<string, unknown> | null)?.[p], wanted[p]);
    return;
  }
  if (wanted === null || metric === "views" || metric.startsWith("exits")) {
    expect(actual).toEqual(wanted);
    return;
  }
  within1Percent(actual, wanted);
};

interface Datum {
  bucket?: number;
  group?: string | null;
  value: Value;
}
interface Answer {
  metric: string;
  from: number;
  to: number;
  data: Datum[];
}

/**
 * Playback analytics (DECISIONS "Playback analytics"): views with known startup times, stalls,
 * errors and exits are played through the telemetry endpoint, at known server times (the manual
 * clock); every metric, per asset, per hour and per day, matches what the definitions give.
 */
export const describeAnalytics = (makeSubject: MakeHttpSubject): void => {
  describe("playback analytics", () => {
    const subject = sharedSubject(makeSubject, { VOD_WORKER_CONCURRENCY: "1" });
    let start = 0;
    let reader: Credential;
    let otherReader: Credential;
    const assetIds = { a: "", b: "" };

    beforeAll(async () => {
      const h = subject();
      const owner = await signUp(h.api);
      const writer = { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["write"])).key };
      reader = { apiKey: (await createApiKey(h.api, { bearer: owner.access_token }, ["read"])).key };
      const other = await signUp(h.api);
      otherReader = { apiKey: (await createApiKey(h.api, { bearer: other.access_token }, ["read"])).key };
      for (const name of ["a", "b"] as const) {
        const asset = await createAsset(h.api, writer, { title: `analytics ${name}` });
        await uploadAndComplete(h.api, writer, asset.id);
        await untilReady(h.api, writer, asset.id);
        assetIds[name] = asset.id;
      }
      // The start of the next UTC day but one: every view's time is then known to the hour.
      start = Math.ceil(h.clock.now() / DAY) * DAY + DAY;
      for (const view of [...VIEWS].sort((x, y) => x.at - y.at)) {
        h.clock.advance(start + view.at - h.clock.now());
        const created = expectStatus(
          await h.api.post<CreatedPlayback>("/v1/playback/sessions", {
            ...credentialOptions(writer),
            json: { asset_id: assetIds[view.asset] },
          }),
          201,
        ).body;
        for (const events of view.batches) {
          const reply = await sendTo("POST", created.urls.telemetry, {
            headers: { "content-type": "text/plain" },
            body: new TextEncoder().encode(
              JSON.stringify({
                token: created.token,
                ...(view.playerVersion ? { player_version: view.playerVersion } : {}),
                events: events.map((e) => ({ playhead_ms: e.ts_ms, ...e })),
              }),
            ),
          });
          expect(reply.status).toBe(204);
          expect(reply.headers.get("x-telemetry-accepted")).toBe(String(events.length));
        }
      }
    }, 120_000);

    const query = (credential: Credential, metric: string, params: Record<string, string | number>) =>
      subject().api.get<Answer>(
        `/v1/analytics/${metric}?${new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]))}`,
        credentialOptions(credential),
      );
    const answer = async (metric: Metric, params: Record<string, string | number>) =>
      expectStatus(await query(reader, metric, params), 200).body;

    const twoDays = () => ({ from: start, to: start + 2 * DAY });

    it("answers every metric over the whole range as one value", async () => {
      for (const metric of METRICS) {
        const body = await answer(metric, twoDays());
        expect(body).toMatchObject({ metric, from: start, to: start + 2 * DAY });
        expect(body.data).toHaveLength(1);
        expect(Object.keys(body.data[0] ?? {})).toEqual(["value"]);
        expectValue(body.data[0]?.value ?? null, expected(metric, VIEWS), metric);
      }
      // The definitions' numbers, once by hand: 6 views, 218 s playing, 6 s stalled in 3 stalls.
      expect((await answer("views", twoDays())).data[0]?.value).toBe(6);
      expect((await answer("playing_time_ms", twoDays())).data[0]?.value).toBe(218_000);
      expectValue(
        (await answer("startup_time_ms", twoDays())).data[0]?.value ?? null,
        { p50: 800, p90: 2_000, p95: 2_000 },
        "startup_time_ms",
      );
    });

    it("answers per asset, and for one asset", async () => {
      for (const metric of METRICS) {
        const body = await answer(metric, { ...twoDays(), group_by: "asset" });
        const groups = (["a", "b"] as const)
          .map((name) => ({ id: assetIds[name], views: VIEWS.filter((v) => v.asset === name) }))
          .sort((x, y) => (x.id < y.id ? -1 : 1));
        expect(body.data.map((d) => d.group)).toEqual(groups.map((g) => g.id));
        for (const [i, d] of body.data.entries())
          expectValue(d.value, expected(metric, groups[i]?.views ?? []), metric);
        const one = await answer(metric, { ...twoDays(), asset_id: assetIds.a });
        expectValue(
          one.data[0]?.value ?? null,
          expected(
            metric,
            VIEWS.filter((v) => v.asset === "a"),
          ),
          metric,
        );
      }
    });

    it("answers per hour and per day, by the time the first event was received", async () => {
      for (const [interval, size] of [
        ["hour", HOUR],
        ["day", DAY],
      ] as const) {
        const buckets = [...new Set(VIEWS.map((v) => start + v.at - ((start + v.at) % size)))].sort(
          (x, y) => x - y,
        );
        for (const metric of METRICS) {
          const body = await answer(metric, { ...twoDays(), interval });
          const wanted = buckets
            .map((bucket) => ({
              bucket,
              views: VIEWS.filter((v) => start + v.at >= bucket && start + v.at < bucket + size),
            }))
            .filter((b) => metric !== "startup_time_ms" || b.views.some((v) => v.startupMs !== null));
          expect(body.data.map((d) => d.bucket)).toEqual(wanted.map((b) => b.bucket));
          for (const [i, d] of body.data.entries())
            expectValue(d.value, expected(metric, wanted[i]?.views ?? []), metric);
        }
      }
      const hours = await answer("views", { ...twoDays(), interval: "hour" });
      expect(hours.data).toEqual([
        { bucket: start, value: 4 },
        { bucket: start + HOUR, value: 1 },
        { bucket: start + DAY + 2 * HOUR, value: 1 },
      ]);
    });

    it("groups by rendition (the one a view started on) and by player version, per day and per asset", async () => {
      const renditions = await answer("views", { ...twoDays(), group_by: "rendition" });
      expect(renditions.data).toEqual([
        { group: null, value: 1 },
        { group: "1080p", value: 1 },
        { group: "360p", value: 1 },
        { group: "720p", value: 3 },
      ]);
      const versions = await answer("playing_time_ms", {
        ...twoDays(),
        group_by: "player_version",
        interval: "day",
      });
      expect(versions.data).toEqual([
        { bucket: start, group: null, value: 40_000 },
        { bucket: start, group: "p1", value: 88_000 },
        { bucket: start, group: "p2", value: 30_000 },
        { bucket: start + DAY, group: "p1", value: 60_000 },
      ]);
      const failures = await answer("playback_failure_percentage", {
        ...twoDays(),
        asset_id: assetIds.a,
        group_by: "player_version",
      });
      expect(failures.data.map((d) => d.group)).toEqual(["p1", "p2"]);
      expectValue(failures.data[0]?.value ?? null, 50, "playback_failure_percentage");
      expectValue(failures.data[1]?.value ?? null, 0, "playback_failure_percentage");
    });

    it("counts a view whose first event was received at from, not one received at to", async () => {
      const v4 = start + HOUR + 5 * 60_000;
      expect((await answer("views", { from: v4, to: v4 + 1 })).data).toEqual([{ value: 1 }]);
      expect((await answer("views", { from: v4 - 1, to: v4 })).data).toEqual([{ value: 0 }]);
      // A later batch of a view does not move it: v1's second batch came in the same minute.
      expect((await answer("views", { from: start + 10 * 60_000, to: start + 11 * 60_000 })).data).toEqual([
        { value: 1 },
      ]);
    });

    it("shows another tenant none of it; the asset's id is not found there", async () => {
      for (const metric of METRICS) {
        const all = expectStatus(await query(otherReader, metric, twoDays()), 200).body;
        expect(all.data).toEqual([{ value: expected(metric, []) }]);
        // The asset is another tenant's: not found, as every resource of another tenant.
        expectError(
          await query(otherReader, metric, { ...twoDays(), asset_id: assetIds.a }),
          404,
          "not_found",
        );
        const grouped = expectStatus(
          await query(otherReader, metric, { ...twoDays(), group_by: "asset", interval: "hour" }),
          200,
        ).body;
        expect(grouped.data).toEqual([]);
      }
    });

    it("refuses bad queries with 400 naming the fields", async () => {
      const range = twoDays();
      expectInvalidFields(await query(reader, "views", { from: range.to, to: range.from }), [
        ["from"],
        ["to"],
      ]);
      expectInvalidFields(await query(reader, "views", { from: range.from, to: range.from }), [
        ["from"],
        ["to"],
      ]);
      expectInvalidFields(await query(reader, "views", { from: range.from, to: range.from + 90 * DAY + 1 }), [
        ["from"],
        ["to"],
      ]);
      expectStatus(await query(reader, "views", { from: range.from, to: range.from + 90 * DAY }), 200);
      expectInvalidFields(await query(reader, "dropped_frames", range), [["metric"]]);
      expectInvalidFields(await query(reader, "views", { ...range, group_by: "country" }), [["group_by"]]);
      expectInvalidFields(await query(reader, "views", { ...range, interval: "week" }), [["interval"]]);
      expectInvalidFields(await query(reader, "views", { to: range.to }), [["from"]]);
      expectInvalidFields(await query(reader, "views", { from: "yesterday", to: range.to }), [["from"]]);
      expectInvalidFields(await query(reader, "views", { from: 1.5, to: range.to }), [["from"]]);
      expectError(await query(reader, "views", { ...range, asset_id: "ast_none" }), 404, "not_found");
    });

    it("needs a credential", async () => {
      const reply = await subject().api.get<Answer>(`/v1/analytics/views?from=0&to=1`);
      expect(reply.status).toBe(401);
    });
  });
};
