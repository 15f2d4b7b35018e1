import { describe, expect, it } from 'vitest';
import { nearest } from './common.js';
import { seedreamSize } from './images.js';

describe('ModelArk sizes', () => {
  it('scale a Seedream 4 size below its minimum area up at the same ratio; Seedream 3 takes it as it is', () => {
    expect(seedreamSize('seedream-4-0-250828', { width: 2048, height: 1152 })).toBe('2048x1152');
    expect(seedreamSize('seedream-4-0-250828', { width: 1024, height: 576 })).toBe('1280x720');
    expect(seedreamSize('seedream-4-0-250828', { width: 1024, height: 1024 })).toBe('1024x1024');
    expect(seedreamSize('seedream-3-0-t2i-250415', { width: 1024, height: 576 })).toBe('1024x576');
  });

  it('send the nearest ratio Seedance takes', () => {
    expect(['16:9', '2:1', '12:5', '5:4', '1:3'].map((r) => nearest(r, ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9']))).toEqual([
      '16:9',
      '16:9',
      '21:9',
      '4:3',
      '9:16',
    ]);
  });
});
