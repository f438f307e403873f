import { performance } from "node:perf_hooks";

/**
 * An admission's budget: a signal that aborts once the budget is spent, and a promise to race
 * the policy against. A warm admission is answered from the caches within the turn of the event
 * loop it started in, and a timer armed and cleared for each of those cost as much as a tenth of
 * its policy; so a deadline arms its timer only if its admission is still waiting once that turn
 * is over, for what is left of the budget, counted from the deadline's start. One `setImmediate`
 * per turn arms the timers of every admission started in it that still waits (and keeps the
 * process alive until then, as the timers do after it).
 */
export interface Deadline {
  /** Aborts with "admission budget of N ms spent" when the budget is spent. */
  readonly signal: AbortSignal;
  /**
   * Rejects with the signal's reason one turn after it aborts, so that a port which does stop
   * at the signal gets to give its own, more precise reason first; never settles otherwise.
   */
  expired(): Promise<never>;
  /** The admission is answered: its timer, if one was armed, is cleared and none is armed later. */
  finish(): void;
}

export function admissionDeadline(budgetMs: number): Deadline {
  const deadline = new AdmissionDeadline(budgetMs, performance.now());
  deadline.slot = unarmed.push(deadline) - 1;
  if (!armingScheduled) {
    armingScheduled = true;
    setImmediate(armUnfinished);
  }
  return deadline;
}

/**
 * The deadlines of this turn that still wait. One that finishes leaves at once (the last one
 * takes its slot), so that admissions answered one after another without the turn ending (a
 * caller that loops on them) do not pile up here.
 */
let unarmed: AdmissionDeadline[] = [];
let armingScheduled = false;

function armUnfinished(): void {
  armingScheduled = false;
  const waiting = unarmed;
  unarmed = [];
  const now = performance.now();
  for (const deadline of waiting) {
    deadline.slot = -1;
    deadline.arm(now);
  }
}

function leaveUnarmed(deadline: AdmissionDeadline): void {
  const last = unarmed.pop()!;
  if (last !== deadline) {
    unarmed[deadline.slot] = last;
    last.slot = deadline.slot;
  }
  deadline.slot = -1;
}

class AdmissionDeadline implements Deadline {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private finished = false;
  private lateRejects: Array<(reason: unknown) => void> | undefined;
  /** Where it is in `unarmed`, or -1. */
  slot = -1;

  constructor(
    private readonly budgetMs: number,
    private readonly startedAt: number,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  expired(): Promise<never> {
    return new Promise<never>((_, reject) => {
      if (this.controller.signal.aborted) setImmediate(reject, this.controller.signal.reason);
      else (this.lateRejects ??= []).push(reject);
    });
  }

  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.slot >= 0) leaveUnarmed(this);
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  arm(now: number): void {
    this.timer = setTimeout(() => this.expire(), Math.max(0, this.startedAt + this.budgetMs - now));
  }

  private expire(): void {
    this.controller.abort(new Error(`admission budget of ${this.budgetMs} ms spent`));
    const reason: unknown = this.controller.signal.reason;
    for (const reject of this.lateRejects ?? []) setImmediate(reject, reason);
  }
}
