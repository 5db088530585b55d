export { type Argon2Options, argon2PasswordHasher } from "./password-hasher.js";
