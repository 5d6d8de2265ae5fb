// Sends one command of the AWS SDK for JavaScript v3's Lambda client,
// configured by the environment alone, as invoke.mjs does: node call.mjs
// COMMAND [INPUT], COMMAND a command's name without "Command"
// ("GetFunction"), INPUT its input as JSON. "paginateListFunctions" walks
// every page of ListFunctions with the SDK's paginator instead. It prints
// one line of JSON: the output (without $metadata) or the pages, or the
// error the SDK raised.
import * as sdk from "@aws-sdk/client-lambda";

const [name, input] = process.argv.slice(2);
const client = new sdk.LambdaClient({ maxAttempts: 1 });
try {
  const params = JSON.parse(input ?? "{}");
  if (name === "paginateListFunctions") {
    const pages = [];
    for await (const page of sdk.paginateListFunctions({ client, pageSize: params.MaxItems }, {})) {
      pages.push(page.Functions.map((f) => f.FunctionName));
    }
    console.log(JSON.stringify({ pages }));
  } else {
    const { $metadata, ...out } = await client.send(new sdk[name + "Command"](params));
    console.log(JSON.stringify({ output: out, requestId: $metadata.requestId ?? "" }));
  }
} catch (e) {
  console.log(JSON.stringify({
    error: e.name, message: e.message, status: e.$metadata?.httpStatusCode ?? 0, requestId: e.$metadata?.requestId ?? "",
  }));
  process.exitCode = 1;
}
