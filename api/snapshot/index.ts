export * from './types.js';
export * from './money.js';
export { compile, parseResource, effectivePricing, contentVersion, formatCompileError, type RawResource, type CompileOptions } from './compile.js';
