export {
  type DependencyLog,
  type RedisAdapters,
  type RedisConfig,
  type RedisHealth,
  redisAdapters,
} from "./redis.js";
