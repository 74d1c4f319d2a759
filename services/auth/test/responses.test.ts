/** The typed answer of mcp.revoke_session as the gateway renders it. */
import test from "ava";
import { create } from "@bufbuild/protobuf";
import { RevokeMcpSessionResponseSchema } from "@cms/contracts/auth/v1/auth_pb";
import { renderObject } from "@cms/gateway/render";

test("mcp.revoke_session: revoked is a number, zero included", (t) => {
  t.deepEqual(renderObject(RevokeMcpSessionResponseSchema, create(RevokeMcpSessionResponseSchema, { revoked: 0 })), { revoked: 0 });
  t.deepEqual(renderObject(RevokeMcpSessionResponseSchema, create(RevokeMcpSessionResponseSchema, { revoked: 3 })), { revoked: 3 });
});
