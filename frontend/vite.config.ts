import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig({
  plugins: [svelte()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // WebKitGTK 4.1 and Safari 16 both run ES2022.
    target: 'es2022',
  },
});
