import { argon2PasswordHasher } from "@vod/adapter-argon2";
import { describePasswordHasher } from "@vod/contract-tests";

describePasswordHasher("argon2", async () => ({ port: argon2PasswordHasher(), cleanup: async () => {} }));
