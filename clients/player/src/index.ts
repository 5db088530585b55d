import { VodPlayer } from "./player.js";
import { VodUploader } from "./uploader.js";

export { PLAYER_VERSION, type TokenRequestDetail, VodPlayer } from "./player.js";
export type {
  UploaderCompleteDetail,
  UploaderErrorDetail,
  UploaderProgressDetail,
  UploaderState,
} from "./uploader.js";
export { VodUploader } from "./uploader.js";

if (!customElements.get("vod-player")) customElements.define("vod-player", VodPlayer);
if (!customElements.get("vod-uploader")) customElements.define("vod-uploader", VodUploader);

declare global {
  interface HTMLElementTagNameMap {
    "vod-player": VodPlayer;
    "vod-uploader": VodUploader;
  }
}
