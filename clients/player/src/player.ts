import Hls, {
  type ErrorData,
  type HlsConfig,
  type Loader,
  type LoaderCallbacks,
  type LoaderConfiguration,
  type LoaderContext,
} from "hls.js";
import { cueAt, parseStoryboard, type StoryboardCue } from "./storyboard.js";
import { type PlaybackEvent, TelemetryBatches } from "./telemetry.js";
import { readToken, renewalDelayMs, type TokenClaims, withToken } from "./token.js";

export const PLAYER_VERSION = "vod-player/0.1.0";

const HEARTBEAT_MS = 10_000;
/** A token that could not be renewed is asked for again this often, until it expires. */
const RETRY_RENEWAL_MS = 5_000;

/** The entitlement of a DRM session (docs/playback.md "Content protection"). */
interface Entitlement {
  readonly expires_at: number;
  readonly license_headers: Readonly<Record<string, string>>;
  readonly key_systems: Readonly<Record<string, { readonly license_url: string }>>;
}

/** What `token-request` carries: the page answers with a promise of the new token. */
export interface TokenRequestDetail {
  respondWith(token: Promise<string> | string): void;
}

const TEMPLATE = `
<style>
  :host { display: block; position: relative; background: #000; color: #fff; font: 13px system-ui, sans-serif; aspect-ratio: 16 / 9; }
  .frame { position: absolute; inset: 0; }
  video { width: 100%; height: 100%; display: block; }
  .controls { position: absolute; left: 0; right: 0; bottom: 0; display: flex; align-items: center; gap: 8px;
    padding: 6px 10px; background: linear-gradient(transparent, rgba(0,0,0,.7)); }
  button { background: none; border: 0; color: inherit; font: inherit; cursor: pointer; padding: 2px 4px; }
  button[hidden] { display: none; }
  button[aria-pressed="true"] { text-decoration: underline; }
  .seek { position: relative; flex: 1; height: 6px; background: rgba(255,255,255,.3); cursor: pointer; border-radius: 3px; }
  .seek .progress { position: absolute; left: 0; top: 0; bottom: 0; background: #3ea6ff; border-radius: 3px; }
  .preview { position: absolute; bottom: 14px; transform: translateX(-50%); display: none; text-align: center; pointer-events: none; }
  .preview .thumb { border: 1px solid #fff; background-repeat: no-repeat; background-color: #000; }
  .seek:hover .preview { display: block; }
  .clock { font-variant-numeric: tabular-nums; white-space: nowrap; }
</style>
<div class="frame">
  <video part="video" playsinline></video>
  <div class="controls" part="controls">
    <button class="play" part="play-button" aria-label="Play">&#9654;</button>
    <div class="seek" part="seek-bar" role="slider" aria-label="Seek" tabindex="0" aria-valuemin="0">
      <div class="progress"></div>
      <div class="preview" part="preview"><div class="thumb"></div><span class="at"></span></div>
    </div>
    <span class="clock">0:00 / 0:00</span>
    <button class="cc" part="subtitles-button" aria-label="Subtitles" aria-pressed="false" hidden>CC</button>
    <button class="mute" part="mute-button" aria-label="Mute">&#128266;</button>
  </div>
</div>`;

const clock = (seconds: number) => {
  if (!Number.isFinite(seconds)) return "0:00";
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const mm = String(Math.floor((s % 3600) / 60));
  const ss = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${mm.padStart(2, "0")}:${ss}` : `${mm}:${ss}`;
};

/** The folder `player.js` was served from: `{media_url}/v1/`. */
const scriptBase = () => new URL("./", import.meta.url).href;

/**
 * `<vod-player playback-token="…">`: plays a playback session with hls.js (ClearKey through the
 * session's entitlement), shows storyboard previews on its seek bar, sends telemetry beacons and,
 * before the token expires, asks the page for a new one (`getToken`, else a `token-request`
 * event) and goes on playing with it. Attributes: `autoplay`, `muted`; `media-url` and
 * `entitlement-url` where the media or DRM app is not where this script came from.
 */
export class VodPlayer extends HTMLElement {
  static observedAttributes = ["playback-token", "muted"];

  /** Set by the page: answers a new playback token for the same session. */
  getToken: (() => Promise<string>) | undefined;

  /** Milliseconds from the start of loading to the first frame shown, once shown. */
  startupMs: number | undefined;

  /** When the first frame was shown, on the page's clock (`performance.now()`), once shown. */
  firstFrameTime: number | undefined;

  private readonly root: ShadowRoot;
  private readonly video: HTMLVideoElement;
  private hls: Hls | undefined;
  private token = "";
  private claims: TokenClaims | undefined;
  private entitlementAnswer: Promise<Entitlement> | undefined;
  private entitlementExpiresAt = 0;
  private telemetry: TelemetryBatches | undefined;
  private cues: StoryboardCue[] = [];
  /** Which `load` is current: an entitlement answered after a newer load starts nothing. */
  private generation = 0;
  private renewal: number | undefined;
  private loadStartedAt = 0;
  private stallStartedAt: number | undefined;
  private seekingFrom: number | undefined;
  private rendition: string | undefined;
  private readonly cleanups: Array<() => void> = [];

  constructor() {
    super();
    this.root = this.attachShadow({ mode: "open" });
    this.root.innerHTML = TEMPLATE;
    this.video = this.root.querySelector("video") as HTMLVideoElement;
  }

  /** The video element, for a page that draws or inspects frames. */
  get media(): HTMLVideoElement {
    return this.video;
  }

  /** The token the player uses now (the last one handed to it). */
  get playbackToken(): string {
    return this.token;
  }

  connectedCallback() {
    this.wireControls();
    // An element upgraded in the document has had attributeChangedCallback load it already.
    const token = this.getAttribute("playback-token");
    if (token && token !== this.token) this.load(token);
  }

  disconnectedCallback() {
    this.telemetry?.flush(true);
    this.unload();
    this.token = "";
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }

  attributeChangedCallback(name: string, old: string | null, value: string | null) {
    if (!this.isConnected || old === value) return;
    if (name === "muted") {
      this.video.muted = value !== null;
      return;
    }
    if (!value || value === this.token) return;
    // A new token for the asset playing (a new session's: the API mints no other) carries on
    // where playback is; a token of another asset plays that from the start.
    if (this.claims !== undefined && readToken(value)?.assetId === this.claims.assetId) this.useToken(value);
    else this.load(value);
  }

  private get mediaBase() {
    const given = this.getAttribute("media-url");
    return given ? `${given.replace(/\/+$/, "")}/v1/` : scriptBase();
  }

  private fileUrl(file: string) {
    return `${this.mediaBase}play/${encodeURIComponent(this.token)}/${file}`;
  }

  /** Starts playing the session of `token` from the beginning. */
  private load(token: string) {
    this.unload();
    this.loadStartedAt = performance.now();
    this.startupMs = undefined;
    this.firstFrameTime = undefined;
    this.token = token;
    this.claims = readToken(token);
    this.video.muted = this.hasAttribute("muted");
    this.telemetry = new TelemetryBatches(`${this.mediaBase}telemetry`, () => this.token, PLAYER_VERSION);
    this.scheduleRenewal();
    this.watchMedia();
    void this.loadStoryboard();
    const manifest = this.fileUrl("master.m3u8");
    if (Hls.isSupported()) void this.startHls(manifest);
    else if (this.video.canPlayType("application/vnd.apple.mpegurl")) {
      // Native HLS (Safari): no loader to hand a new token to; the session's token must outlast it.
      this.video.src = manifest;
      if (this.hasAttribute("autoplay")) void this.video.play().catch(() => undefined);
    }
  }

  private unload() {
    this.generation++;
    if (this.renewal !== undefined) clearTimeout(this.renewal);
    this.renewal = undefined;
    this.hls?.destroy();
    this.hls = undefined;
    this.entitlementAnswer = undefined;
    this.stallStartedAt = undefined;
    this.rendition = undefined;
  }

  private async startHls(manifest: string) {
    const player = this;
    const generation = this.generation;
    const Base = Hls.DefaultConfig.loader;
    // Every request hls.js makes goes out with the token the player holds now, whatever token
    // the URL was resolved under: a renewed token applies to the very next segment.
    class TokenLoader extends Base {
      override load(
        context: LoaderContext,
        config: LoaderConfiguration,
        callbacks: LoaderCallbacks<LoaderContext>,
      ) {
        context.url = withToken(context.url, player.token);
        super.load(context, config, callbacks);
      }
    }
    const config: Partial<HlsConfig> = {
      loader: TokenLoader as unknown as new (c: HlsConfig) => Loader<LoaderContext>,
      // At most 30 s ahead: hls.js would otherwise fill 60 MB, a whole low-bitrate video, which a
      // viewer who leaves early never watches (and the platform still delivers).
      maxBufferLength: 30,
      maxMaxBufferLength: 30,
    };
    if (this.claims?.drm) {
      try {
        const entitlement = await this.entitlement();
        if (generation !== this.generation) return;
        const clearKey = entitlement.key_systems["org.w3.clearkey"];
        if (!clearKey) throw new Error("the entitlement lists no ClearKey licence");
        Object.assign(config, {
          emeEnabled: true,
          drmSystems: { "org.w3.clearkey": { licenseUrl: clearKey.license_url } },
          // The licence token expires before the session may (5 minutes): a fresh entitlement
          // is asked for when the one held has run out.
          licenseXhrSetup: async (xhr: XMLHttpRequest, url: string) => {
            const current = await this.entitlement();
            xhr.open("POST", url, true);
            for (const [name, value] of Object.entries(current.license_headers))
              xhr.setRequestHeader(name, value);
          },
        });
      } catch (error) {
        if (generation !== this.generation) return;
        this.report("error", { error_code: "entitlement_failed", message: String(error) });
        this.telemetry?.flush();
        return;
      }
    }
    const hls = new Hls(config);
    this.hls = hls;
    hls.on(Hls.Events.ERROR, (_event, data: ErrorData) => {
      if (!data.fatal) return;
      this.report("error", { error_code: data.details, error_type: data.type });
      this.telemetry?.flush();
    });
    hls.on(Hls.Events.LEVEL_SWITCHED, (_event, data) => {
      const level = hls.levels[data.level];
      if (!level) return;
      this.rendition = level.height ? `${level.height}p` : level.name;
      this.report("rendition_change", { bitrate_kbps: Math.round(level.bitrate / 1000) });
    });
    hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED, (_event, data) => {
      (this.root.querySelector(".cc") as HTMLElement).hidden = data.subtitleTracks.length === 0;
    });
    hls.on(Hls.Events.MANIFEST_PARSED, () => {
      if (this.hasAttribute("autoplay")) void this.video.play().catch(() => undefined);
    });
    hls.loadSource(manifest);
    hls.attachMedia(this.video);
  }

  /** The session's entitlement, asked for again once the one held has expired. */
  private entitlement(): Promise<Entitlement> {
    if (this.entitlementAnswer && Date.now() < this.entitlementExpiresAt - 5_000)
      return this.entitlementAnswer;
    const url = this.getAttribute("entitlement-url") ?? `${this.mediaBase}drm/entitlement`;
    const answer = fetch(url, { method: "POST", headers: { authorization: `Bearer ${this.token}` } }).then(
      async (res) => {
        if (!res.ok) throw new Error(`entitlement: ${res.status}`);
        const entitlement = (await res.json()) as Entitlement;
        this.entitlementExpiresAt = entitlement.expires_at;
        return entitlement;
      },
    );
    this.entitlementAnswer = answer;
    this.entitlementExpiresAt = Number.POSITIVE_INFINITY;
    answer.catch(() => {
      if (this.entitlementAnswer === answer) this.entitlementAnswer = undefined;
    });
    return answer;
  }

  /** Switches to `token` (of the same session) for every request from now on. */
  private useToken(token: string) {
    this.token = token;
    this.claims = readToken(token) ?? this.claims;
    this.entitlementAnswer = undefined;
    this.scheduleRenewal();
  }

  private scheduleRenewal() {
    if (this.renewal !== undefined) clearTimeout(this.renewal);
    this.renewal = undefined;
    if (!this.claims) return;
    this.renewal = window.setTimeout(() => void this.renew(), renewalDelayMs(this.claims, Date.now()));
  }

  /** Asks the page for a new token: `getToken`, else a `token-request` event answered with `respondWith`. */
  private async renew() {
    const claims = this.claims;
    let answer: Promise<string> | undefined;
    if (this.getToken) answer = this.getToken();
    else {
      const detail: TokenRequestDetail = {
        respondWith: (token) => {
          answer = Promise.resolve(token);
        },
      };
      this.dispatchEvent(new CustomEvent("token-request", { detail, bubbles: true, composed: true }));
    }
    const token = await answer?.catch(() => undefined);
    if (typeof token === "string" && token.length > 0 && token !== this.token) return this.useToken(token);
    // Nobody answered, or not with a usable token: ask again while the one held still works.
    if (claims && claims === this.claims && Date.now() < claims.expiresAt)
      this.renewal = window.setTimeout(() => void this.renew(), RETRY_RENEWAL_MS);
  }

  private async loadStoryboard() {
    this.cues = [];
    const url = this.fileUrl("storyboard.vtt");
    try {
      const res = await fetch(url);
      if (res.ok) this.cues = parseStoryboard(await res.text(), url);
    } catch {
      // Previews are an extra: the seek bar works without them.
    }
  }

  private report(event: string, fields: Omit<PlaybackEvent, "event" | "ts_ms" | "playhead_ms"> = {}) {
    this.telemetry?.add({
      event,
      ts_ms: Date.now(),
      playhead_ms: Math.round(this.video.currentTime * 1000),
      ...(this.rendition ? { rendition: this.rendition } : {}),
      ...fields,
    });
  }

  /** The media element's events as telemetry, and the heartbeat. */
  private watchMedia() {
    const video = this.video;
    const on = (type: string, listener: () => void) => {
      video.addEventListener(type, listener);
      this.cleanups.push(() => video.removeEventListener(type, listener));
    };
    if (this.cleanups.length > 0) return;
    const firstFrame = () => {
      if (this.startupMs !== undefined) return;
      this.firstFrameTime = performance.now();
      this.startupMs = Math.round(this.firstFrameTime - this.loadStartedAt);
      this.report("first_frame", { startup_ms: this.startupMs });
      this.telemetry?.flush();
    };
    on("playing", () => {
      if (this.startupMs === undefined) {
        // The first frame is the one composited: requestVideoFrameCallback says when, where the
        // browser has it; `playing` otherwise.
        if ("requestVideoFrameCallback" in video) video.requestVideoFrameCallback(() => firstFrame());
        else firstFrame();
      }
      if (this.stallStartedAt !== undefined) {
        this.report("stall_end", { stall_ms: Math.round(performance.now() - this.stallStartedAt) });
        this.stallStartedAt = undefined;
      }
    });
    on("play", () => this.report("play"));
    on("pause", () => {
      if (video.ended) return;
      this.report("pause");
      // A viewer who pauses may well leave: what happened until now goes at once.
      this.telemetry?.flush();
    });
    on("waiting", () => {
      if (this.startupMs === undefined || video.seeking || this.stallStartedAt !== undefined) return;
      this.stallStartedAt = performance.now();
      this.report("stall_start");
    });
    // By `seeking`, currentTime is already the target: where the seek came from is the last
    // position played.
    let played = 0;
    on("timeupdate", () => {
      if (!video.seeking) played = video.currentTime;
    });
    on("seeking", () => {
      this.seekingFrom ??= Math.round(played * 1000);
    });
    on("seeked", () => {
      this.report("seek", { from_ms: this.seekingFrom });
      this.seekingFrom = undefined;
    });
    on("ended", () => {
      this.report("ended");
      this.telemetry?.flush();
    });
    on("error", () => {
      if (this.hls) return; // hls.js reports its own, with its detail
      this.report("error", { error_code: `media_error_${video.error?.code ?? 0}` });
      this.telemetry?.flush();
    });
    const heartbeat = window.setInterval(() => {
      if (!video.paused) this.report("heartbeat");
      this.telemetry?.flush();
    }, HEARTBEAT_MS);
    this.cleanups.push(() => clearInterval(heartbeat));
    const leaving = () => this.telemetry?.flush(true);
    window.addEventListener("pagehide", leaving);
    this.cleanups.push(() => window.removeEventListener("pagehide", leaving));
  }

  private wired = false;

  private wireControls() {
    if (this.wired) return;
    this.wired = true;
    const $ = <E extends HTMLElement>(selector: string) => this.root.querySelector(selector) as E;
    const video = this.video;
    const play = $<HTMLButtonElement>(".play");
    const seek = $<HTMLDivElement>(".seek");
    const progress = $<HTMLDivElement>(".progress");
    const preview = $<HTMLDivElement>(".preview");
    const thumb = $<HTMLDivElement>(".thumb");
    const at = $<HTMLSpanElement>(".at");
    const time = $<HTMLSpanElement>(".clock");
    const cc = $<HTMLButtonElement>(".cc");
    const mute = $<HTMLButtonElement>(".mute");

    const paint = () => {
      const duration = video.duration;
      progress.style.width =
        Number.isFinite(duration) && duration > 0 ? `${(video.currentTime / duration) * 100}%` : "0";
      time.textContent = `${clock(video.currentTime)} / ${clock(duration)}`;
      seek.setAttribute("aria-valuenow", String(Math.floor(video.currentTime)));
      seek.setAttribute("aria-valuemax", String(Number.isFinite(duration) ? Math.floor(duration) : 0));
      play.innerHTML = video.paused ? "&#9654;" : "&#10074;&#10074;";
      play.setAttribute("aria-label", video.paused ? "Play" : "Pause");
      mute.innerHTML = video.muted ? "&#128263;" : "&#128266;";
    };
    for (const type of ["timeupdate", "durationchange", "play", "pause", "volumechange"])
      video.addEventListener(type, paint);
    play.addEventListener(
      "click",
      () => void (video.paused ? video.play().catch(() => undefined) : video.pause()),
    );
    mute.addEventListener("click", () => {
      video.muted = !video.muted;
    });
    cc.addEventListener("click", () => {
      const hls = this.hls;
      if (!hls) return;
      const on = hls.subtitleTrack < 0;
      hls.subtitleTrack = on ? 0 : -1;
      hls.subtitleDisplay = on;
      cc.setAttribute("aria-pressed", String(on));
    });
    const timeAt = (clientX: number) => {
      const box = seek.getBoundingClientRect();
      const fraction = Math.min(1, Math.max(0, (clientX - box.left) / box.width));
      return { fraction, time: fraction * (Number.isFinite(video.duration) ? video.duration : 0) };
    };
    seek.addEventListener("click", (e) => {
      video.currentTime = timeAt(e.clientX).time;
    });
    seek.addEventListener("keydown", (e) => {
      if (e.key === "ArrowRight") video.currentTime = Math.min(video.duration, video.currentTime + 5);
      if (e.key === "ArrowLeft") video.currentTime = Math.max(0, video.currentTime - 5);
    });
    seek.addEventListener("pointermove", (e) => {
      const { fraction, time: t } = timeAt(e.clientX);
      preview.style.left = `${fraction * 100}%`;
      at.textContent = clock(t);
      const cue = cueAt(this.cues, t);
      thumb.style.display = cue ? "block" : "none";
      if (!cue) return;
      // The sprite sheet lives under the token's path too: shown with the token held now.
      thumb.style.width = `${cue.width}px`;
      thumb.style.height = `${cue.height}px`;
      thumb.style.backgroundImage = `url("${withToken(cue.image, this.token)}")`;
      thumb.style.backgroundPosition = `-${cue.x}px -${cue.y}px`;
    });
  }
}
