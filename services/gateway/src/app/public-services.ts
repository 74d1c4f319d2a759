/** The services whose annotated RPCs are the public operations (the op registry's input). */
import type { DescService } from "@bufbuild/protobuf";
import { AuthService } from "@cms/contracts/auth/v1/auth_pb";
import { CollectionsService } from "@cms/contracts/collections/v1/collections_pb";
import { MediaService } from "@cms/contracts/media/v1/media_pb";
import { SocialService } from "@cms/contracts/social/v1/social_pb";
import { WebhooksService } from "@cms/contracts/webhooks/v1/webhooks_pb";
import { MetaService } from "@cms/contracts/gateway/v1/meta_pb";

/** Every service whose annotated RPCs are public operations. */
export const PUBLIC_SERVICES: DescService[] = [MetaService, AuthService, CollectionsService, MediaService, SocialService, WebhooksService];
