/**
 * SCALE.md's bill is what bench/bill.ts computes from bench/prices.json, BENCHMARKS.md and the
 * synthesized template: a changed price, benchmark or resource without `npx tsx bench/bill.ts`
 * fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BILL_MARKERS, billSection, withBill } from '../../bench/bill';
import { ROOT } from '../infra/helpers';

const scale = readFileSync(join(ROOT, 'SCALE.md'), 'utf8');

it('SCALE.md holds the bill bench/bill.ts writes (run `npx tsx bench/bill.ts` after a change)', () => {
  expect(withBill(scale, billSection())).toBe(scale);
});

it('prices every service the stack uses, each with its source and date, and counts the alarms from the template', () => {
  const section = scale.slice(scale.indexOf(BILL_MARKERS.begin), scale.indexOf(BILL_MARKERS.end));
  for (const item of [
    'SQS',
    'DynamoDB',
    'Lambda requests',
    'Lambda duration',
    'CodeBuild, ARM small',
    'CodeBuild, x86 small',
    'S3',
    'EventBridge',
    'Secrets Manager',
    'KMS',
    'CloudWatch alarms',
    'dashboard',
    'CloudWatch Logs',
  ]) {
    expect(section).toContain(`| ${item}`);
  }
  expect(section).toMatch(/CloudWatch alarms \(\d+ in the template\)/);
  for (const line of section.split('\n').filter((l) => l.startsWith('- ')))
    expect(line).toMatch(/https:\/\/aws\.amazon\.com\/\S+, read \d{4}-\d{2}-\d{2}/);
});
