import { Data, Either } from "effect";

/**
 * A move the state machine does not allow. Use cases turn it into the spec's error for the
 * operation (most often upload_in_progress, "a conflict with the resource's current state").
 */
export class IllegalTransition extends Data.TaggedError("IllegalTransition")<{
  readonly subject: string;
  readonly from: string;
  readonly event: string;
}> {}

export type Transition<S, E> = (state: S, event: E, now: number) => Either.Either<S, IllegalTransition>;

export const illegal = (subject: string, from: string, event: string) =>
  Either.left(new IllegalTransition({ subject, from, event }));
