/**
 * How many tree levels a request by id asks for (src/adapters/git/tree-editor.ts): the head's with
 * the top of the tree, then the levels below the touched trees within the estimate's budget.
 */
import { TREE_BUDGET, historyTreeLevels, levelsBelow } from '../../src/adapters/git/tree-editor';

test('the head comes with all but the last three levels its paths need: at least the root and its subtrees, at most six', () => {
  expect(historyTreeLevels(['README.md'])).toBe(1);
  expect(historyTreeLevels(['docs/a.md'])).toBe(2);
  expect(historyTreeLevels(['a/b/c/d.ts'])).toBe(2);
  // 7 directories deep (the benchmark's 300,000 files): levels 0 to 4, then 5 to 7 in one request.
  expect(historyTreeLevels(['services/pkg1/src/m1/m2/m3/m0/file1.ts', 'libs/pkg0/src/file0.ts'])).toBe(5);
  expect(historyTreeLevels([`${'d/'.repeat(20)}f.ts`])).toBe(6);
});

test('levels below grow while the estimate stays within the budget, never past what the paths need, and not from an unknown width', () => {
  // 27 trees with 4 subtrees each: 27 + 108 + 432 trees for two levels; a third (1,728 more) would pass 2,048.
  expect(levelsBelow(27, 4, 2)).toBe(2);
  expect(levelsBelow(27, 4, 5)).toBe(2);
  expect(levelsBelow(27, 4, 1)).toBe(1);
  expect(levelsBelow(27, 0, 5)).toBe(0);
  expect(levelsBelow(TREE_BUDGET, 1, 3)).toBe(0);
});
