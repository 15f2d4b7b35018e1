export * from './types.js';
export * from './money.js';
export { compile, parseResource, effectivePricing, contentVersion, formatCompileError, type RawResource, type CompileOptions } from './compile.js';
export { KEY_PREFIX } from '../v1alpha1/apikey.js';
