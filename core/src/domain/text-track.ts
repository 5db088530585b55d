/** A text track of an asset (DECISIONS "Images, downloads and text tracks"). */
export const textTrackStatuses = ["ready"] as const;
export type TextTrackStatus = (typeof textTrackStatuses)[number];

export interface TextTrack {
  readonly id: string;
  readonly tenant_id: string;
  readonly asset_id: string;
  readonly type: "text";
  /** BCP 47, in its canonical form (`en-US`). */
  readonly language_code: string;
  readonly name: string;
  readonly closed_captions: boolean;
  readonly status: TextTrackStatus;
  readonly created_at: number;
  readonly deleted_at: number | null;
}

/** At most this many tracks per asset (DECISIONS); the next one is refused as a quota (409). */
export const MAX_TEXT_TRACKS_PER_ASSET = 30;

/** A track's content: WebVTT or SRT text of at most this many UTF-8 bytes. */
export const MAX_TEXT_TRACK_BYTES = 2 * 1024 * 1024;
