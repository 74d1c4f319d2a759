/**
 * The module table: every service module plus the gateway. `--target` picks which of them a
 * process runs (launcher.ts); `all` runs them together.
 */
import { launch, loadConfig, type Config, type LaunchOptions, type System } from "@cms/platform";
import { authModule } from "@cms/auth";
import { collectionsModule } from "@cms/collections";
import { mediaModule } from "@cms/media";
import { socialModule } from "@cms/social";
import { webhooksModule } from "@cms/webhooks";
import { gatewayModule } from "@cms/gateway";

export const MODULES: LaunchOptions = {
  modules: [authModule, collectionsModule, mediaModule, socialModule, webhooksModule],
  gateway: gatewayModule,
};

export function startSystem(config: Config = loadConfig(), opts: Partial<LaunchOptions> = {}): Promise<System> {
  return launch(config, { ...MODULES, ...opts });
}

export type { System };
