/** `npm run chaos -- --rates`: fault rates over the defaults, or from none, refused with a reason when wrong. */
import { DEFAULT_RATES, parseRates } from '../chaos/config';

it('sets the rates named over the defaults', () => {
  expect(parseRates('gitSlow=0.25, github5xx=0')).toEqual({ ...DEFAULT_RATES, gitSlow: 0.25, github5xx: 0 });
});

it('starts from no fault at all after "none"', () => {
  const rates = parseRates('none,gitSlow=0.25');
  expect(rates.gitSlow).toBe(0.25);
  expect(Object.entries(rates).filter(([name, rate]) => name !== 'gitSlow' && rate !== 0)).toEqual([]);
  expect(Object.keys(rates).sort()).toEqual(Object.keys(DEFAULT_RATES).sort());
});

it.each([
  ['gitslow=0.1', /no fault rate named gitslow; the rates are dynamodbThrottle, /],
  ['gitSlow=2', /gitSlow must be a probability from 0 to 1, got "2"/],
  ['gitSlow=-0.1', /gitSlow must be a probability from 0 to 1/],
  ['gitSlow', /"gitSlow" is not name=probability/],
  ['gitSlow=0.1,none', /"none" is not name=probability/],
])('refuses %s', (text, message) => {
  expect(() => parseRates(text)).toThrow(message);
});
