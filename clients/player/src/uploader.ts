import { type CompletedUpload, createClient, type UploadProgress, uploadThroughEndpoint } from "@vod/client";

/** `upload-progress`'s detail. */
export interface UploaderProgressDetail {
  readonly uploadId: string;
  readonly uploadedBytes: number;
  readonly totalBytes: number;
  /** 0 to 100, whole. */
  readonly percent: number;
}

/** `upload-complete`'s detail: the completed session and its asset (now `uploaded`). */
export interface UploaderCompleteDetail {
  readonly assetId: string;
  readonly upload: CompletedUpload["upload"];
  readonly asset: CompletedUpload["asset"];
}

/** `upload-error`'s detail: a `VodError`'s status and code when the API or the endpoint refused. */
export interface UploaderErrorDetail {
  readonly error: unknown;
  readonly message: string;
  readonly status?: number;
  readonly code?: string;
}

export type UploaderState = "idle" | "uploading" | "complete" | "error";

const template = `
<style>
:host { display: block; font: 14px system-ui, sans-serif; }
label { display: flex; flex-direction: column; align-items: center; justify-content: center; gap: 8px;
  min-height: 120px; padding: 16px; border: 2px dashed #888; border-radius: 8px; cursor: pointer;
  text-align: center; }
:host([data-dragging]) label { border-color: #2a7de1; background: #2a7de111; }
:host([data-state="uploading"]) label { cursor: progress; }
input { position: absolute; width: 1px; height: 1px; opacity: 0; }
progress { width: 100%; }
progress[hidden] { display: none; }
.status[data-error] { color: #c62828; }
</style>
<label part="drop-zone">
  <input type="file" part="input">
  <span class="prompt" part="prompt">Drop a video here or choose a file</span>
  <progress part="progress" max="100" value="0" hidden></progress>
  <span class="status" part="status" role="status" aria-live="polite"></span>
</label>`;

/**
 * `<vod-uploader>`: a drop zone and a file input that upload the chosen file with `@vod/client`,
 * the bytes straight to the upload session's part URLs. With `endpoint`, the page's own server
 * starts and completes the session (no key in the page); with `api-url` and `api-key`, it calls
 * the API itself (internal tools only). Events: `upload-progress`, `upload-complete`, `upload-error`.
 */
export class VodUploader extends HTMLElement {
  static observedAttributes = ["accept"];

  private readonly root: ShadowRoot;
  private readonly input: HTMLInputElement;
  private readonly bar: HTMLProgressElement;
  private readonly status: HTMLElement;
  private running: AbortController | undefined;
  private current: UploaderState = "idle";

  constructor() {
    super();
    this.root = this.attachShadow({ mode: "open" });
    this.root.innerHTML = template;
    this.input = this.root.querySelector("input") as HTMLInputElement;
    this.bar = this.root.querySelector("progress") as HTMLProgressElement;
    this.status = this.root.querySelector(".status") as HTMLElement;
    this.input.accept = "video/*";
    this.input.addEventListener("change", () => {
      const file = this.input.files?.[0];
      if (file) void this.upload(file);
      this.input.value = "";
    });
    this.addEventListener("dragover", (e) => {
      e.preventDefault();
      this.toggleAttribute("data-dragging", true);
    });
    this.addEventListener("dragleave", () => this.removeAttribute("data-dragging"));
    this.addEventListener("drop", (e) => {
      e.preventDefault();
      this.removeAttribute("data-dragging");
      const file = e.dataTransfer?.files[0];
      if (file) void this.upload(file);
    });
  }

  attributeChangedCallback(name: string, _old: string | null, value: string | null) {
    if (name === "accept") this.input.accept = value ?? "video/*";
  }

  disconnectedCallback() {
    this.running?.abort(new DOMException("the uploader left the page", "AbortError"));
  }

  /** `idle`, `uploading`, `complete` or `error`; also the host's `data-state` attribute, to style it. */
  get state(): UploaderState {
    return this.current;
  }

  /** Stops the upload in progress (its parts in flight are aborted); `upload-error` tells it. */
  cancel() {
    this.running?.abort(new DOMException("cancelled", "AbortError"));
  }

  /**
   * Uploads `file` as the widget does with a dropped or chosen one; resolves to the completed
   * upload, or undefined when it failed (`upload-error` says why).
   */
  async upload(file: File): Promise<UploaderCompleteDetail | undefined> {
    if (this.running) return undefined;
    const running = new AbortController();
    this.running = running;
    this.setState("uploading");
    this.bar.hidden = false;
    this.bar.value = 0;
    this.show(`${file.name}: 0%`);
    const parallel = Number(this.getAttribute("parallel")) || undefined;
    const onProgress = (p: UploadProgress) => {
      const percent = p.totalBytes === 0 ? 100 : Math.floor((p.uploadedBytes / p.totalBytes) * 100);
      this.bar.value = percent;
      this.show(`${file.name}: ${percent}%`);
      this.emit<UploaderProgressDetail>("upload-progress", {
        uploadId: p.uploadId,
        uploadedBytes: p.uploadedBytes,
        totalBytes: p.totalBytes,
        percent,
      });
    };
    try {
      const done = await this.send(file, { parallel, onProgress, signal: running.signal });
      this.bar.value = 100;
      this.show(`${file.name}: uploaded`);
      this.setState("complete");
      const detail = { assetId: done.asset.id, upload: done.upload, asset: done.asset };
      this.emit<UploaderCompleteDetail>("upload-complete", detail);
      return detail;
    } catch (error) {
      const { status, code } = (error ?? {}) as { status?: unknown; code?: unknown };
      const message = error instanceof Error ? error.message : String(error);
      this.show(`${file.name}: ${message}`, true);
      this.setState("error");
      this.emit<UploaderErrorDetail>("upload-error", {
        error,
        message,
        ...(typeof status === "number" ? { status } : {}),
        ...(typeof code === "string" ? { code } : {}),
      });
      return undefined;
    } finally {
      this.running = undefined;
    }
  }

  private async send(
    file: File,
    options: { parallel?: number; onProgress: (p: UploadProgress) => void; signal: AbortSignal },
  ): Promise<CompletedUpload> {
    const endpoint = this.getAttribute("endpoint");
    if (endpoint) return uploadThroughEndpoint({ endpoint, file, ...options });
    const baseUrl = this.getAttribute("api-url");
    const apiKey = this.getAttribute("api-key");
    if (!baseUrl || !apiKey)
      throw new TypeError("<vod-uploader> needs an endpoint attribute (or api-url and api-key)");
    const client = createClient({ baseUrl, apiKey });
    const asset = await client.assets.create({ title: file.name });
    return client.uploads.upload({ assetId: asset.id, file, ...options });
  }

  private setState(state: UploaderState) {
    this.current = state;
    this.dataset.state = state;
  }

  private show(text: string, error = false) {
    this.status.textContent = text;
    this.status.toggleAttribute("data-error", error);
  }

  private emit<T>(type: string, detail: T) {
    this.dispatchEvent(new CustomEvent<T>(type, { detail, bubbles: true, composed: true }));
  }
}
