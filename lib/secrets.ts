/**
 * The platform's secrets, and the one way to let something read one.
 *
 * A secret is either given by complete ARN (optionally encrypted with a customer-managed KMS key)
 * or created by the stack holding SECRET_PLACEHOLDER in its documented shape, which every reader
 * refuses with a message naming the secret, so a forgotten secret fails loudly instead of
 * authenticating with a random string. Created secrets follow the environment's removal policy.
 *
 * A reader gets `secretsmanager:GetSecretValue` on exactly its secret (not grantRead's
 * DescribeSecret, which nothing calls) and, for a customer-managed key, `kms:Decrypt` on that key
 * only through Secrets Manager and only for that secret (encryption context SecretARN).
 */
import { Arn, ArnFormat, type RemovalPolicy, SecretValue, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { GIT_CREDENTIAL_KEYS, SECRET_PLACEHOLDER } from '../contract/runtime-env';

export interface PlatformSecret {
  readonly secret: secretsmanager.ISecret;
  /** The customer-managed key that encrypts a secret given by ARN. */
  readonly kmsKeyArn?: string;
}

/** The two value shapes the platform reads: git credentials JSON, or a bare token. */
export type SecretShape = 'gitCredentials' | 'token';

export interface PlatformSecretProps {
  /** Complete ARN of an existing secret. @default a new secret holding the placeholder */
  readonly arn?: string;
  /** Customer-managed key of the existing secret (ignored for a created one). */
  readonly kmsKeyArn?: string;
  readonly shape: SecretShape;
  readonly description: string;
  /** Of a created secret. */
  readonly removalPolicy: RemovalPolicy;
}

/** The value a created secret starts with: the documented shape, every field the placeholder. */
export function placeholderValue(shape: SecretShape): string {
  return shape === 'token'
    ? SECRET_PLACEHOLDER
    : JSON.stringify({
        [GIT_CREDENTIAL_KEYS.username]: SECRET_PLACEHOLDER,
        [GIT_CREDENTIAL_KEYS.password]: SECRET_PLACEHOLDER,
      });
}

export function platformSecret(scope: Construct, id: string, props: PlatformSecretProps): PlatformSecret {
  if (props.arn) {
    return {
      secret: secretsmanager.Secret.fromSecretCompleteArn(scope, id, props.arn),
      ...(props.kmsKeyArn ? { kmsKeyArn: props.kmsKeyArn } : {}),
    };
  }
  const secret = new secretsmanager.Secret(scope, id, {
    description: props.description,
    // Not a secret: a marker the readers refuse. CloudFormation leaves the stored value alone as
    // long as this template value does not change (contract/runtime-env.ts SECRET_PLACEHOLDER).
    secretStringValue: SecretValue.unsafePlainText(placeholderValue(props.shape)),
    removalPolicy: props.removalPolicy,
  });
  Validations.of(secret).acknowledge({
    id: 'AwsSolutions-SMG4',
    reason:
      'Holds a credential issued by the git host or GitHub; it is rotated there, and Secrets Manager cannot rotate it.',
  });
  return { secret };
}

/** Lets `grantee` read `ref`'s value, and decrypt it when a customer-managed key encrypts it. */
export function grantSecretRead(grantee: iam.IGrantable, ref: PlatformSecret): void {
  iam.Grant.addToPrincipal({
    grantee,
    actions: ['secretsmanager:GetSecretValue'],
    resourceArns: [ref.secret.secretArn],
  });
  if (!ref.kmsKeyArn) return;
  // A secret given by ARN carries its region; the key is used through Secrets Manager there.
  const { region } = Arn.split(ref.secret.secretArn, ArnFormat.COLON_RESOURCE_NAME);
  grantee.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['kms:Decrypt'],
      resources: [ref.kmsKeyArn],
      conditions: {
        StringEquals: {
          'kms:ViaService': `secretsmanager.${region}.amazonaws.com`,
          'kms:EncryptionContext:SecretARN': ref.secret.secretArn,
        },
      },
    }),
  );
}
