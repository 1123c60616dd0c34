import { tenantOf } from '../../tools/local/poller';
import { TenantTurns } from '../../tools/local/tenant-turns';
import { sqsRecordFactory } from '../support/sqs-records';

/** Messages named `<tenant><n>`: the tenant is the leading letters. */
const turns = () => new TenantTurns<string>((m) => m.replace(/\d+$/, ''));
const burst = (tenant: string, n: number) => Array.from({ length: n }, (_, i) => `${tenant}${i + 1}`);

function takeAll(t: TenantTurns<string>, max = 1): string[] {
  const out: string[] = [];
  for (let batch = t.take(max); batch.length > 0; batch = t.take(max)) out.push(...batch);
  return out;
}

describe('TenantTurns (the local stage poller serves tenants in turn)', () => {
  it('serves a lone tenant in arrival order, up to the batch size', () => {
    const t = turns();
    t.add(burst('noisy', 5));
    expect(t.take(2)).toEqual(['noisy1', 'noisy2']);
    expect(t.take(10)).toEqual(['noisy3', 'noisy4', 'noisy5']);
    expect(t.take(10)).toEqual([]);
    expect(t.size).toBe(0);
  });

  it("puts a quiet tenant's job ahead of a noisy tenant's backlog: it waits one turn, not the burst", () => {
    const t = turns();
    t.add(burst('noisy', 100));
    expect(t.take(1)).toEqual(['noisy1']);
    t.add(['quiet1']);
    expect(takeAll(t).slice(0, 3)).toEqual(['noisy2', 'quiet1', 'noisy3']);
  });

  it('alternates between backlogged tenants, each in its own order', () => {
    const t = turns();
    t.add([...burst('a', 3), ...burst('b', 2), 'c1']);
    expect(takeAll(t)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
  });

  it('fills a batch with one message per tenant in turn before taking a second of any', () => {
    const t = turns();
    t.add([...burst('a', 3), 'b1', 'c1']);
    expect(t.take(4)).toEqual(['a1', 'b1', 'c1', 'a2']);
    expect(t.take(4)).toEqual(['a3']);
  });

  it('lets a tenant wait at most one message per other tenant with messages waiting', () => {
    const t = turns();
    t.add([...burst('x', 50), ...burst('y', 50), ...burst('z', 50)]);
    t.take(7);
    t.add(['quiet1']);
    expect(takeAll(t).indexOf('quiet1')).toBeLessThanOrEqual(3);
  });

  it('drains every waiting message when the poller stops, and counts what waits', () => {
    const t = turns();
    t.add([...burst('a', 2), 'b1']);
    expect(t.size).toBe(3);
    expect(t.items().sort()).toEqual(['a1', 'a2', 'b1']);
    expect(t.drain().sort()).toEqual(['a1', 'a2', 'b1']);
    expect(t.size).toBe(0);
    expect(t.take(5)).toEqual([]);
  });

  it("takes a record's tenant from its group or tenantId attribute; a record with neither is a tenant of its own", () => {
    expect(tenantOf(sqsRecordFactory('{}', { attributes: { tenantId: 'acme' } }))).toBe('acme');
    expect(tenantOf(sqsRecordFactory('{}', { messageGroupId: 'acme', attributes: {} }))).toBe('acme');
    expect(tenantOf(sqsRecordFactory('{}', { messageId: 'm-1' }))).toBe('m-1');
  });
});
