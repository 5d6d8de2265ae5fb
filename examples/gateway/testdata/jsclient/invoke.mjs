// Invokes a function through the AWS SDK for JavaScript v3's Lambda client,
// configured by the environment alone (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL_LAMBDA), as a user's
// program would be: node invoke.mjs FUNCTION [PAYLOAD [OPTIONS]], OPTIONS
// being JSON of more InvokeCommand fields ({"Qualifier": "1"}). It prints
// one line of JSON: the answer, or the error the SDK raised.
import { LambdaClient, InvokeCommand } from "@aws-sdk/client-lambda";

const [fn, payload, options] = process.argv.slice(2);
const client = new LambdaClient({ maxAttempts: 1 });
try {
  const out = await client.send(new InvokeCommand({
    FunctionName: fn,
    Payload: payload === undefined ? undefined : new TextEncoder().encode(payload),
    ...JSON.parse(options ?? "{}"),
  }));
  console.log(JSON.stringify({
    status: out.StatusCode,
    functionError: out.FunctionError ?? "",
    payload: out.Payload ? new TextDecoder().decode(out.Payload) : "", // none for Event and DryRun
    executedVersion: out.ExecutedVersion ?? "",
    logResult: out.LogResult ?? "",
    requestId: out.$metadata.requestId ?? "",
  }));
} catch (e) {
  console.log(JSON.stringify({
    error: e.name, message: e.message, status: e.$metadata?.httpStatusCode ?? 0, requestId: e.$metadata?.requestId ?? "",
  }));
  process.exitCode = 1;
}
