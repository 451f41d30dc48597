// JSON values, as the client's declarations use them.

/** A JSON value, as `JSON.parse` gives it. */
export type JSONValue = string | number | boolean | null | JSONValue[] | JSONObject;

/** A JSON object. A store's model is one (docs/CONCEPTS.md). */
export interface JSONObject {
  [key: string]: JSONValue;
}
