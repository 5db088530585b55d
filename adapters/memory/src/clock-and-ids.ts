import { randomBytes } from "node:crypto";
import type { Clock, IdKind, IdOf, Ids } from "@vod/core";

export const systemClock = (): Clock => ({ now: () => Date.now() });

/** A clock that moves only when told: for tests of expiry without sleeping. */
export interface ManualClock extends Clock {
  set(epochMs: number): void;
  advance(ms: number): void;
}

export const manualClock = (start = Date.UTC(2026, 0, 1)): ManualClock => {
  let now = start;
  return {
    now: () => now,
    set: (t) => {
      now = t;
    },
    advance: (ms) => {
      now += ms;
    },
  };
};

const prefixes: Record<IdKind, string> = {
  tenant: "tnt",
  user: "usr",
  session: "ses",
  api_key: "key",
  asset: "ast",
  upload: "upl",
  playback: "pbs",
  webhook: "whk",
  delivery: "dlv",
  event: "evt",
  track: "trk",
};

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** `<prefix>_<20 random base36 chars>` (about 103 bits): readable in logs, unguessable. */
export const randomIds = (): Ids => ({
  id: <K extends IdKind>(kind: K) => {
    let out = "";
    for (const b of randomBytes(40)) {
      if (b < 252) out += ALPHABET[b % 36];
      if (out.length === 20) break;
    }
    return `${prefixes[kind]}_${out.padEnd(20, "0")}` as IdOf<K>;
  },
  randomBytes: (n) => new Uint8Array(randomBytes(n)),
});
