export { logMailer } from "./log-mailer.js";
export { type SmtpMailer, type SmtpMailerOptions, smtpMailer } from "./mailer.js";
