// SPDX-License-Identifier: Apache-2.0
// @isola/sdk: TypeScript SDK for isola's native sandbox API (docs/openapi.yaml, docs/sdk.md).

export { Client, Sandbox, Processes, Files, EventStream } from "./client.js";
export { Transport, DEFAULT_SOCKET, type ClientOptions, type Body } from "./http.js";
export { PtySession, WebSocketClient } from "./ws.js";
export * from "./errors.js";
export { Execution, Result, type CodeContext, type ExecutionError, type RunCodeOptions } from "./code.js";
export type * from "./types.js";
export const VERSION = "0.1.0";
