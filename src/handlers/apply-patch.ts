/**
 * The apply-patch function: the ordered lane's worker (the sequencer). It consumes the FIFO queue,
 * applies patches itself (the only writer of a workspace) and pins later stages to the workspace
 * head. The processor is src/core/sequencer.ts; its AWS adapters come from src/compose/aws-sequencer.ts.
 */
import { lambdaHandler } from '../compose/aws';
import { awsSequencerDeps } from '../compose/aws-sequencer';
import { createSequencer } from '../core/sequencer';

export const handler = lambdaHandler(() => createSequencer(awsSequencerDeps()));
