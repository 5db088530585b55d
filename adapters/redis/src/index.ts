export { type RedisBackdoor, redisBackdoor } from "./backdoor.js";
export { type RedisAdapters, type RedisConfig, redisAdapters } from "./redis.js";
