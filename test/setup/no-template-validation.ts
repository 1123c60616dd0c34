/**
 * Jest setup of the inner loop only (`npm run test:unit`, jest.unit.config.js): switches off CDK's
 * built-in CloudFormation validation of each synthesized template, by its documented variable. Its
 * engine starts anew in every test file and takes about four fifths of a synth's time. `npm test`
 * and `npm run test:pr` keep it, so a template it refuses still fails before a merge.
 */
process.env['CDK_VALIDATION'] = 'false';
