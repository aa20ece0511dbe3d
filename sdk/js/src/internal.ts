// SPDX-License-Identifier: Apache-2.0
// Re-exports shared by the SDK's modules (kept apart to avoid import cycles).

export { IsolaError, ProtocolError, TimeoutError, UnavailableError, errorFor } from "./errors.js";
export { errorFromBody as errorFromBodyPublic } from "./http.js";
