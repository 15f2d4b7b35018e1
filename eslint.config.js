// Type-aware lint: the rules that catch lost promises matter most in a proxy, where an
// unawaited write silently drops a charge or a response. Production code gets typescript-eslint's
// type-checked recommended set; tests keep the promise rules only (they poke at internals).
import tseslint from 'typescript-eslint';

const promiseRules = {
  '@typescript-eslint/no-floating-promises': 'error',
  '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
  '@typescript-eslint/await-thenable': 'error',
};

export default tseslint.config(
  {
    ignores: ['vitest.config.ts', 'eslint.config.js', '*.cjs', 'bin/**', 'scratch/**', 'dist/**', 'node_modules/**', 'crds/**', 'charts/**', '.tollgate/**'],
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: promiseRules,
  },
  {
    files: ['kernel/**/*.ts', 'api/**/*.ts', 'operator/**/*.ts', 'proxy/**/*.ts', 'cli/**/*.ts', 'simulator/**/*.ts'],
    ignores: ['**/*.test.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    rules: {
      ...promiseRules,
      // `const { secret: _secret, ...rest } = row` is how a field is left out of an answer.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
);
