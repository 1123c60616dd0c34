// Placeholder until the handler lands; replaced by its owner.
export const handler = async (): Promise<never> => {
  throw new Error('open-pr handler not built yet');
};
