/** The Swagger UI files `/docs` serves, copied into `dist/swagger-ui` at build time (see tsup.config.ts). */
export const SWAGGER_UI_FILES = [
  'swagger-ui-bundle.js',
  'swagger-ui-bundle.js.map',
  'swagger-ui.css',
  'swagger-ui.css.map',
  'favicon-32x32.png',
  'favicon-16x16.png',
] as const
