// Placeholder until the handler lands; replaced by its owner.
export const handler = async (): Promise<never> => {
  throw new Error('run-tests handler not built yet');
};
