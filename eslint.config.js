// Type-aware lint: the rules that catch lost promises matter most in a proxy,
// where an unawaited write silently drops a charge or a response.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['vitest.config.ts', 'eslint.config.js', 'bin/**', 'scratch/**', 'dist/**', 'node_modules/**', 'crds/**', 'charts/**', '.tollgate/**'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
    },
  },
);
