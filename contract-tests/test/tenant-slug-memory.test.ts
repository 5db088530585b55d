import { memoryStorage, randomIds } from "@vod/adapter-memory";
import { memoryBackdoor } from "@vod/adapter-memory/testing";
import { Conflict, createVod, type Job } from "@vod/core";
import { Effect, Either, Option } from "effect";
import { describe, expect, it } from "vitest";
import { memoryCorePorts } from "./memory-core.js";

/**
 * What the HTTP suites cannot force: signup drawing a deleted tenant's slug again. The core over
 * memory ports, with randomness that draws the slug suffix `000000` when told to.
 */
describe("a deleted tenant's slug (memory)", () => {
  it("is never given again: signup draws another, and answers 409 when every draw is taken", async () => {
    const random = randomIds();
    // The slug's 6 base36 characters come from one call of 12 bytes; all zeros give "000000".
    let fixedDraws = 0;
    const storage = memoryStorage();
    const ports = memoryCorePorts({
      ids: {
        id: random.id,
        randomBytes: (n) => {
          if (n !== 12 || fixedDraws === 0) return random.randomBytes(n);
          fixedDraws -= 1;
          return new Uint8Array(n);
        },
      },
      storage,
    });
    const vod = createVod(ports);
    const backdoor = memoryBackdoor(storage);
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect);
    const signup = (email: string) =>
      vod.accounts.signup({ email, password: "a long password", tenantName: "Acme" }, "10.0.0.1");

    fixedDraws = 1;
    const first = await run(signup("first@example.com"));
    expect(first.tenant.slug).toBe("acme-000000");
    await run(vod.tenants.remove(first.tenant.id));
    const [job] = (await backdoor.jobs()).filter((j) => j.name === "delete-tenant");
    expect(job?.data).toStrictEqual({ tenant_id: first.tenant.id });
    await run(
      vod.tenants.removeData({
        id: "job_1",
        name: "delete-tenant",
        data: { tenant_id: first.tenant.id },
        attempt: 1,
        maxAttempts: 3,
      } satisfies Job<"delete-tenant">),
    );
    expect(await backdoor.rowsOfTenant(first.tenant.id)).toStrictEqual({});

    // The first draw is the retired slug: another is drawn.
    fixedDraws = 1;
    const second = await run(signup("second@example.com"));
    expect(fixedDraws).toBe(0);
    expect(second.tenant.slug).toMatch(/^acme-[0-9a-z]{6}$/);
    expect(second.tenant.slug).not.toBe("acme-000000");

    // Three draws, all retired: 409, and nothing of the account stored.
    fixedDraws = 3;
    const third = await run(Effect.either(signup("third@example.com")));
    expect(fixedDraws).toBe(0);
    expect(Either.isLeft(third) && third.left).toBeInstanceOf(Conflict);
    expect(Option.isNone(await run(storage.users.findByEmail("third@example.com")))).toBe(true);
  });
});
