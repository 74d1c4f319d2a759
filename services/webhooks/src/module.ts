/** The webhooks service module. */
import type { ServiceModule } from "@cms/platform";
import { WebhooksService } from "@cms/contracts/webhooks/v1/webhooks_pb";

export const webhooksModule: ServiceModule = {
  name: "webhooks",
  schema: "webhooks",
  migrations: [],
  async init() {
    // Operations without an implementation answer Connect "unimplemented", which the gateway
    // reports as 501 not_implemented.
    return { routes: (router) => { router.service(WebhooksService, {}); } };
  },
};
