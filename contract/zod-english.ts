/**
 * The schemas here and in src/ use Zod Mini (`zod/mini`): its functions tree-shake, so a Lambda
 * bundle carries about 27 KiB of zod instead of the classic API's 88 KiB (methods on classes never
 * drop out). Zod Mini loads no locale, and without one every message is "Invalid input": each
 * module that defines schemas imports this file, which loads the English messages (the classic
 * API's default) and only those.
 */
import { config } from 'zod/mini';
import { en } from 'zod/locales';

config(en());
