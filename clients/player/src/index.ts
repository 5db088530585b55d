import { VodPlayer } from "./player.js";

export { PLAYER_VERSION, type TokenRequestDetail, VodPlayer } from "./player.js";

if (!customElements.get("vod-player")) customElements.define("vod-player", VodPlayer);

declare global {
  interface HTMLElementTagNameMap {
    "vod-player": VodPlayer;
  }
}
