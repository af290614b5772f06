"""Admin calls on the tests' moto server (tests/it/support/s3.rs), with
boto3 from moto's own install: make a bucket, delete or list objects, make
an IAM user with a policy, and switch on moto's checking of signatures and
policies. Usage: s3_admin.py ENDPOINT COMMAND ARGS..."""
import json
import sys
import urllib.request

import boto3

endpoint, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
# moto accepts any key until its checking is on; the admin's own are the
# root user's, which the checking lets through.
session = boto3.session.Session(
    aws_access_key_id="crewlet-test",
    aws_secret_access_key="crewlet-test-secret",
    region_name="us-east-1",
)
s3 = session.client("s3", endpoint_url=endpoint)

if command == "create-bucket":
    s3.create_bucket(Bucket=args[0])
elif command == "delete":
    s3.delete_object(Bucket=args[0], Key=args[1])
elif command == "list":
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args[0]):
        for o in page.get("Contents", []):
            print(o["Key"], o["Size"])
elif command == "user":
    # user NAME ACTION...: a user allowed exactly these actions on every
    # bucket and object; prints its key and secret.
    iam = session.client("iam", endpoint_url=endpoint)
    name, actions = args[0], args[1:]
    iam.create_user(UserName=name)
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
    }
    iam.put_user_policy(UserName=name, PolicyName="only", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    print(key["AccessKeyId"], key["SecretAccessKey"])
elif command == "enforce-auth":
    req = urllib.request.Request(
        endpoint + "/moto-api/reset-auth", data=b"0", method="POST",
        headers={"Content-Type": "text/plain"},
    )
    urllib.request.urlopen(req).read()
else:
    sys.exit("unknown command " + command)
