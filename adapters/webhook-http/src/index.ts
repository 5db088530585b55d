export { type HttpWebhookSenderOptions, httpWebhookSender, isPublicAddress } from "./webhook-sender.js";
