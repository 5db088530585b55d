import { ContainerModule, type ResolutionContext } from "inversify";
import type { VodPorts } from "./tokens.js";
import { Tokens } from "./tokens.js";
import { createVod, type VodConfigInput } from "./vod.js";

/** Resolves every port the core needs from the container. */
export const resolvePorts = (ctx: ResolutionContext): VodPorts => ({
  clock: ctx.get(Tokens.Clock),
  ids: ctx.get(Tokens.Ids),
  storage: ctx.get(Tokens.Storage),
  passwordHasher: ctx.get(Tokens.PasswordHasher),
  tokenSigner: ctx.get(Tokens.TokenSigner),
  identityVerifier: ctx.get(Tokens.IdentityVerifier),
  rateLimiter: ctx.get(Tokens.RateLimiter),
  objectStore: ctx.get(Tokens.ObjectStore),
  revocationStore: ctx.get(Tokens.RevocationStore),
  links: ctx.get(Tokens.Links),
  revocationFeed: ctx.get(Tokens.RevocationFeed, { optional: true }),
  telemetrySink: ctx.get(Tokens.TelemetrySink),
  jobQueue: ctx.get(Tokens.JobQueue, { optional: true }),
  mediaProcessor: ctx.get(Tokens.MediaProcessor, { optional: true }),
  imageMaker: ctx.get(Tokens.ImageMaker, { optional: true }),
  textTrackReader: ctx.get(Tokens.TextTrackReader, { optional: true }),
  metrics: ctx.get(Tokens.Metrics, { optional: true }),
  webhookSender: ctx.get(Tokens.WebhookSender, { optional: true }),
  mailer: ctx.get(Tokens.Mailer, { optional: true }),
});

/**
 * Binds the platform (`Tokens.Vod`) from whatever adapters the host loaded. Dynamic values, so the
 * core needs no decorators and no emitted metadata. Config may be bound at `Tokens.Config`.
 */
export const coreModule = () =>
  new ContainerModule(({ bind }) => {
    bind(Tokens.Vod)
      .toDynamicValue((ctx) =>
        createVod(resolvePorts(ctx), ctx.get<VodConfigInput>(Tokens.Config, { optional: true }) ?? {}),
      )
      .inSingletonScope();
  });
