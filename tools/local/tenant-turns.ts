/**
 * The order in which the local stage poller hands out the messages it holds: tenants take turns.
 * On AWS a stage queue is an SQS fair queue (its messages carry MessageGroupId = tenantId) and SQS
 * itself puts a quiet tenant's messages ahead of a noisy tenant's backlog; fauxqs hands messages
 * out in arrival order and ignores the group, so the poller receives ahead (up to its lookahead)
 * and serves the tenants round-robin: each batch takes one message of the tenant whose turn it is,
 * then the next tenant's, and a tenant that still has messages goes to the back of the line. A
 * tenant seen for the first time joins at the back, so a quiet tenant waits at most one message
 * per other tenant with messages waiting, whatever their backlogs. Messages of one tenant keep
 * their arrival order. Pure: no I/O, no clock.
 */
export class TenantTurns<T> {
  private readonly waiting = new Map<string, T[]>();
  /** Tenants with messages waiting, the next turn first. */
  private readonly line: string[] = [];
  private count = 0;

  constructor(private readonly tenantOf: (item: T) => string) {}

  /** Messages waiting. */
  get size(): number {
    return this.count;
  }

  /** Every message waiting, in no particular order (to extend their visibility). */
  items(): T[] {
    return [...this.waiting.values()].flat();
  }

  add(items: readonly T[]): void {
    for (const item of items) {
      const tenant = this.tenantOf(item);
      const queue = this.waiting.get(tenant);
      if (queue) queue.push(item);
      else {
        this.waiting.set(tenant, [item]);
        this.line.push(tenant);
      }
      this.count++;
    }
  }

  /** The next batch: up to `max` messages, one per turn, removed from the waiting ones. */
  take(max: number): T[] {
    const batch: T[] = [];
    while (batch.length < max) {
      const tenant = this.line.shift();
      if (tenant === undefined) break;
      const queue = this.waiting.get(tenant) as T[];
      batch.push(queue.shift() as T);
      this.count--;
      if (queue.length > 0) this.line.push(tenant);
      else this.waiting.delete(tenant);
    }
    return batch;
  }

  /** Removes and returns every message waiting (the poller is stopping). */
  drain(): T[] {
    const all = this.items();
    this.waiting.clear();
    this.line.length = 0;
    this.count = 0;
    return all;
  }
}
