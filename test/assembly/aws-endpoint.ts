/**
 * The AWS endpoint of the assembly run (AWS_ENDPOINT_URL of every function): one loopback HTTP
 * server that takes every SDK request, records it as IAM sees it (the principal, from the access
 * key its credentials carry; the IAM action; the resource ARNs; the context keys) and forwards it
 * to what stands in for the service: fauxqs for SQS and S3, the test lane's emulator (dynalite or
 * DynamoDB Local) for DynamoDB, the run's stand-ins for EventBridge, Secrets Manager, CodeBuild and
 * CloudFormation (stand-ins.ts). The service comes from the request's SigV4 credential scope, the
 * operation from X-Amz-Target (JSON protocols), the form's Action (query protocol) or the method
 * and path (S3), as AWS's own front ends read them.
 *
 * fauxqs names queues by URLs of its own; the endpoint translates the template's queue URLs to
 * them in requests and back in answers, so the functions only ever see the template's URLs.
 * Signatures are not verified. Calls are recorded with `aws:SecureTransport` true: on AWS the SDK
 * reaches every service over HTTPS.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACCOUNT, PARTITION, REGION } from './cloud-assembly';

/** Who made a call: a role (a function's, CodeBuild's), a service principal, or the test itself. */
export type Principal =
  | { readonly kind: 'role'; readonly name: string; readonly roleArn: string }
  | { readonly kind: 'service'; readonly service: string; readonly sourceArn: string }
  | { readonly kind: 'operator' };

export interface RecordedCall {
  readonly principal: Principal;
  readonly service: string;
  readonly operation: string;
  readonly action: string;
  readonly resources: readonly string[];
  readonly context: Readonly<Record<string, string | string[]>>;
  /** The HTTP status the service answered. */
  status?: number;
}

export interface AwsEndpoint {
  readonly port: number;
  readonly calls: RecordedCall[];
  /** Access key id a principal signs with. */
  keyFor(principal: Principal): string;
  close(): Promise<void>;
}

export interface AwsEndpointOptions {
  /** Where each service's requests go, by signing name: `http://127.0.0.1:<port>`. */
  readonly targets: Readonly<Record<string, string>>;
  /** Template queue URL -> fauxqs queue URL. */
  readonly queueUrls: ReadonlyMap<string, string>;
  /** A secret's complete ARN from the ARN or the name a request gives (the Secrets Manager stand-in's). */
  readonly secretArnOf?: (id: string) => string | undefined;
}

/** IAM actions whose name is not `<service>:<Operation>`. */
const S3_ACTIONS: Record<string, string> = {
  GetObject: 's3:GetObject',
  HeadObject: 's3:GetObject',
  PutObject: 's3:PutObject',
  ListObjectsV2: 's3:ListBucket',
  HeadBucket: 's3:ListBucket',
  CreateBucket: 's3:CreateBucket',
};

const arn = (service: string, resource: string) => `arn:${PARTITION}:${service}:${REGION}:${ACCOUNT}:${resource}`;
const queueArnOf = (url: string) => arn('sqs', url.split('/').pop()!);

/** The resources and context keys of one request, as IAM authorizes it. */
function authorization(
  service: string,
  operation: string,
  body: any,
  path: string,
  options: AwsEndpointOptions,
): { resources: string[]; context: Record<string, string | string[]> } {
  switch (service) {
    case 'sqs':
      if (operation === 'GetQueueUrl') return { resources: [arn('sqs', body.QueueName)], context: {} };
      return { resources: [queueArnOf(body.QueueUrl)], context: {} };
    case 'dynamodb': {
      // A batch names its tables as the keys of RequestItems; every other operation one TableName.
      if (body.RequestItems)
        return {
          resources: Object.keys(body.RequestItems).map((name) => arn('dynamodb', `table/${name}`)),
          context: {},
        };
      const table = arn('dynamodb', `table/${body.TableName}`);
      return { resources: [body.IndexName ? `${table}/index/${body.IndexName}` : table], context: {} };
    }
    case 'events': {
      const entries: any[] = body.Entries ?? [];
      const buses = entries.map((e) =>
        String(e.EventBusName ?? 'default').startsWith('arn:')
          ? e.EventBusName
          : arn('events', `event-bus/${e.EventBusName ?? 'default'}`),
      );
      return {
        resources: [...new Set(buses)],
        context: {
          'events:source': [...new Set(entries.map((e) => e.Source))],
          'events:detail-type': [...new Set(entries.map((e) => e.DetailType))],
        },
      };
    }
    case 'secretsmanager': {
      // By ARN or by name; a secret being created is authorized on the ARN it is to have (its name and six characters).
      const id: string = body.SecretId ?? body.Name;
      const resource =
        options.secretArnOf?.(id) ?? (id.startsWith('arn:') ? id : arn('secretsmanager', `secret:${id}-AbCdEf`));
      return {
        resources: [resource],
        context: body.SecretId ? { 'secretsmanager:SecretId': body.SecretId } : { 'secretsmanager:Name': body.Name },
      };
    }
    case 'codebuild': {
      if (operation === 'BatchGetBuilds')
        return {
          resources: [...new Set((body.ids as string[]).map((id) => arn('codebuild', `project/${id.split(':')[0]}`)))],
          context: {},
        };
      // StopBuild is authorized on the build's project (a build id is `<project>:<uuid>`).
      if (operation === 'StopBuild')
        return { resources: [arn('codebuild', `project/${String(body.id).split(':')[0]}`)], context: {} };
      return { resources: [arn('codebuild', `project/${body.projectName}`)], context: {} };
    }
    case 'cloudformation': {
      const stack = String(body.StackName ?? '*');
      return { resources: [stack.startsWith('arn:') ? stack : arn('cloudformation', `stack/${stack}/*`)], context: {} };
    }
    case 's3': {
      const [bucket, ...key] = path.split('?')[0]!.slice(1).split('/');
      return {
        resources: [
          key.length > 0 && key.join('/') !== ''
            ? `arn:${PARTITION}:s3:::${bucket}/${decodeURIComponent(key.join('/'))}`
            : `arn:${PARTITION}:s3:::${bucket}`,
        ],
        context: {},
      };
    }
    default:
      throw new Error(`the run's AWS endpoint has no stand-in for the service ${service}`);
  }
}

function s3Operation(method: string, path: string): string {
  const [pathname, query = ''] = path.split('?');
  const hasKey = pathname!.slice(1).split('/').length > 1 && !pathname!.endsWith('/');
  if (!hasKey)
    return method === 'HEAD'
      ? 'HeadBucket'
      : method === 'PUT'
        ? 'CreateBucket'
        : query.includes('list-type=2')
          ? 'ListObjectsV2'
          : `${method}Bucket`;
  return (
    ({ GET: 'GetObject', HEAD: 'HeadObject', PUT: 'PutObject' } as Record<string, string>)[method] ?? `${method}Object`
  );
}

const readBody = (req: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });

const replaceAll = (text: string, pairs: Iterable<[string, string]>): string => {
  let out = text;
  for (const [from, to] of pairs) out = out.split(from).join(to);
  return out;
};

export async function startAwsEndpoint(options: AwsEndpointOptions): Promise<AwsEndpoint> {
  const calls: RecordedCall[] = [];
  const principals = new Map<string, Principal>();
  const toFauxqs = [...options.queueUrls.entries()];
  const fromFauxqs = toFauxqs.map(([a, b]) => [b, a] as [string, string]);
  const server: Server = createServer(async (req, res) => {
    try {
      const raw = await readBody(req);
      const scope = /Credential=([^/]+)\/\d+\/[^/]+\/([^/]+)\/aws4_request/.exec(
        String(req.headers.authorization ?? ''),
      );
      if (!scope) throw new Error(`unsigned request to the run's AWS endpoint: ${req.method} ${req.url}`);
      const [, accessKey, service] = scope as unknown as [string, string, string];
      const principal = principals.get(accessKey);
      if (!principal) throw new Error(`a request signed with an access key the run never gave out: ${accessKey}`);
      const target = String(req.headers['x-amz-target'] ?? '');
      const form = String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
      const json =
        service === 's3' || raw.length === 0
          ? {}
          : form
            ? Object.fromEntries(new URLSearchParams(raw.toString('utf8')))
            : JSON.parse(raw.toString('utf8'));
      const operation =
        service === 's3'
          ? s3Operation(req.method!, req.url!)
          : form
            ? String(json.Action)
            : target.slice(target.lastIndexOf('.') + 1);
      const { resources, context } = authorization(service, operation, json, req.url!, options);
      const call: RecordedCall = {
        principal,
        service,
        operation,
        resources,
        // SQS authorizes a batch call as its single action (SendMessageBatch is sqs:SendMessage).
        action:
          service === 's3'
            ? (S3_ACTIONS[operation] ?? `s3:${operation}`)
            : `${service}:${service === 'sqs' ? operation.replace(/Batch$/, '') : operation}`,
        context: { 'aws:SecureTransport': 'true', 'aws:RequestedRegion': REGION, ...context },
      };
      calls.push(call);
      const upstream = options.targets[service];
      if (!upstream) throw new Error(`the run's AWS endpoint has no stand-in for the service ${service}`);
      const body = service === 'sqs' ? Buffer.from(replaceAll(raw.toString('utf8'), toFauxqs)) : raw;
      const { 'transfer-encoding': _sent, ...requestHeaders } = req.headers;
      const forwarded = httpRequest(
        `${upstream}${req.url}`,
        {
          method: req.method,
          headers: { ...requestHeaders, host: new URL(upstream).host, 'content-length': String(body.length) },
        },
        async (answer) => {
          call.status = answer.statusCode;
          const payload = await readBody(answer);
          const out = service === 'sqs' ? Buffer.from(replaceAll(payload.toString('utf8'), fromFauxqs)) : payload;
          const { 'transfer-encoding': _answered, ...headers } = answer.headers;
          res.writeHead(answer.statusCode ?? 500, { ...headers, 'content-length': String(out.length) });
          res.end(out);
        },
      );
      forwarded.on('error', (error) => res.destroy(error));
      forwarded.end(body);
    } catch (error) {
      res.writeHead(500, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'InternalFailure', message: String(error) }));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let n = 0;
  return {
    port: (server.address() as AddressInfo).port,
    calls,
    keyFor(principal) {
      const existing = [...principals.entries()].find(([, p]) => JSON.stringify(p) === JSON.stringify(principal));
      if (existing) return existing[0];
      const key = `ASIARUN${String(++n).padStart(13, '0')}`;
      principals.set(key, principal);
      return key;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
