// Playwright's test runner, pointed at Debian's chromium (its own browser
// download cannot work here): one worker, tests in file order, because the
// later ones build on the account the first one makes.
const { defineConfig } = require('@playwright/test');

module.exports = defineConfig({
  testDir: '.',
  testMatch: /.*\.spec\.js/,
  workers: 1,
  fullyParallel: false,
  timeout: 90_000,
  expect: { timeout: 15_000 },
  reporter: 'list',
  outputDir: process.env.EQ_PORTAL_RESULTS || 'test-results',
  use: {
    baseURL: process.env.EQ_PORTAL_BASE,
    browserName: 'chromium',
    launchOptions: { executablePath: process.env.EQ_CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox'] },
    locale: 'en-US',
    viewport: { width: 1280, height: 800 },
  },
});
