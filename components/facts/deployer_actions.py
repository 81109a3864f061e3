"""The IAM actions `pulumi up` and `pulumi preview` need from the deployer, by what the program does.

Each registered resource type needs the calls its provider makes to create, read, update, tag and
delete it; each live read needs the calls of its data source. The actions are the API operations
those calls are (an IAM action is named ``<service prefix>:<operation>``), as the Service
Authorization Reference lists them (docs.aws.amazon.com/service-authorization/latest/reference/,
"Actions defined by <service>"); the calls are the Terraform AWS provider's, which pulumi-aws wraps
(hashicorp/terraform-provider-aws, ``internal/service/<service>/<resource>.go``: its Create, Read,
Update and Delete functions and the tag helpers the service's ``tags_gen.go`` generates). A
resource type without AWS calls (Kubernetes objects, the library's components, TLS keys) is absent.
"""

from __future__ import annotations

from typing import Mapping

TAGS_EC2 = ("ec2:CreateTags", "ec2:DeleteTags")
"""EC2 tags every resource it creates through TagSpecifications and updates them with these."""
TAGS_EKS = ("eks:TagResource", "eks:UntagResource")
"""EKS resources carry their tags in their Describe answer and change them with these."""

RESOURCE_ACTIONS: Mapping[str, tuple[str, ...]] = {
    # internal/service/ec2/vpc_.go: the read also finds the VPC's default network ACL, main route
    # table and default security group, and each attribute (DescribeVpcAttribute).
    "aws:ec2/vpc:Vpc": (
        "ec2:CreateVpc", "ec2:DescribeVpcs", "ec2:DescribeVpcAttribute", "ec2:ModifyVpcAttribute", "ec2:DeleteVpc",
        "ec2:DescribeNetworkAcls", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_subnet.go
    "aws:ec2/subnet:Subnet": (
        "ec2:CreateSubnet", "ec2:DescribeSubnets", "ec2:ModifySubnetAttribute", "ec2:DeleteSubnet", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_internet_gateway.go: created, then attached to the VPC.
    "aws:ec2/internetGateway:InternetGateway": (
        "ec2:CreateInternetGateway", "ec2:AttachInternetGateway", "ec2:DescribeInternetGateways",
        "ec2:DetachInternetGateway", "ec2:DeleteInternetGateway", *TAGS_EC2,
    ),
    # internal/service/ec2/ec2_eip.go: the read asks for the address's domain name attribute too.
    "aws:ec2/eip:Eip": (
        "ec2:AllocateAddress", "ec2:DescribeAddresses", "ec2:DescribeAddressesAttribute", "ec2:DisassociateAddress",
        "ec2:ReleaseAddress", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_nat_gateway.go
    "aws:ec2/natGateway:NatGateway": (
        "ec2:CreateNatGateway", "ec2:DescribeNatGateways", "ec2:DeleteNatGateway", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_route_table.go
    "aws:ec2/routeTable:RouteTable": (
        "ec2:CreateRouteTable", "ec2:DescribeRouteTables", "ec2:DeleteRouteTable", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_route.go
    "aws:ec2/route:Route": ("ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:DescribeRouteTables", "ec2:DeleteRoute"),
    # internal/service/ec2/vpc_route_table_association.go
    "aws:ec2/routeTableAssociation:RouteTableAssociation": (
        "ec2:AssociateRouteTable", "ec2:ReplaceRouteTableAssociation", "ec2:DescribeRouteTables",
        "ec2:DisassociateRouteTable",
    ),
    # internal/service/ec2/vpc_endpoint.go: a gateway endpoint's read looks its prefix list up;
    # CreateVpcEndpoint's dependent actions (Service Authorization Reference) check the VPC, its
    # subnets and security groups, and give an interface endpoint's private DNS zone to the VPC.
    "aws:ec2/vpcEndpoint:VpcEndpoint": (
        "ec2:CreateVpcEndpoint", "ec2:DescribeVpcEndpoints", "ec2:ModifyVpcEndpoint", "ec2:DeleteVpcEndpoints",
        "ec2:DescribePrefixLists", "ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
        "route53:AssociateVPCWithHostedZone", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_security_group.go: the create revokes the default egress rule, the
    # delete revokes the rules (revokeRulesOnDelete) and removes ENIs a deleted service left behind.
    "aws:ec2/securityGroup:SecurityGroup": (
        "ec2:CreateSecurityGroup", "ec2:DescribeSecurityGroups", "ec2:DeleteSecurityGroup",
        "ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress", "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface", *TAGS_EC2,
    ),
    # internal/service/ec2/vpc_security_group_ingress_rule.go and ..._egress_rule.go
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "ec2:AuthorizeSecurityGroupIngress", "ec2:DescribeSecurityGroupRules", "ec2:ModifySecurityGroupRules",
        "ec2:RevokeSecurityGroupIngress", *TAGS_EC2,
    ),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "ec2:AuthorizeSecurityGroupEgress", "ec2:DescribeSecurityGroupRules", "ec2:ModifySecurityGroupRules",
        "ec2:RevokeSecurityGroupEgress", *TAGS_EC2,
    ),
    # internal/service/ec2/ec2_launch_template.go: every data change is a new version.
    "aws:ec2/launchTemplate:LaunchTemplate": (
        "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
        "ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions", "ec2:DeleteLaunchTemplate", *TAGS_EC2,
    ),
    # internal/service/ec2/ec2_placement_group.go
    "aws:ec2/placementGroup:PlacementGroup": (
        "ec2:CreatePlacementGroup", "ec2:DescribePlacementGroups", "ec2:DeletePlacementGroup", *TAGS_EC2,
    ),
    # internal/service/iam/role.go: the delete detaches managed and deletes inline policies and
    # takes the role out of its instance profiles first.
    "aws:iam/role:Role": (
        "iam:CreateRole", "iam:GetRole", "iam:UpdateRole", "iam:UpdateAssumeRolePolicy", "iam:UpdateRoleDescription",
        "iam:TagRole", "iam:UntagRole", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies", "iam:DeleteRolePolicy",
        "iam:DetachRolePolicy", "iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteRole",
    ),
    # internal/service/iam/policy.go: an update is a new default version, the oldest one deleted.
    "aws:iam/policy:Policy": (
        "iam:CreatePolicy", "iam:GetPolicy", "iam:GetPolicyVersion", "iam:ListPolicyVersions", "iam:CreatePolicyVersion",
        "iam:DeletePolicyVersion", "iam:TagPolicy", "iam:UntagPolicy", "iam:DeletePolicy",
    ),
    # internal/service/iam/role_policy.go
    "aws:iam/rolePolicy:RolePolicy": ("iam:PutRolePolicy", "iam:GetRolePolicy", "iam:DeleteRolePolicy"),
    # internal/service/iam/role_policy_attachment.go
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": (
        "iam:AttachRolePolicy", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy",
    ),
    # internal/service/eks/cluster.go: updates are asynchronous, waited for with DescribeUpdate.
    "aws:eks/cluster:Cluster": (
        "eks:CreateCluster", "eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:UpdateClusterVersion",
        "eks:DescribeUpdate", "eks:DeleteCluster", *TAGS_EKS,
    ),
    # internal/service/eks/addon.go
    "aws:eks/addon:Addon": (
        "eks:CreateAddon", "eks:DescribeAddon", "eks:UpdateAddon", "eks:DescribeUpdate", "eks:DeleteAddon", *TAGS_EKS,
    ),
    # internal/service/eks/node_group.go
    "aws:eks/nodeGroup:NodeGroup": (
        "eks:CreateNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig", "eks:UpdateNodegroupVersion",
        "eks:DescribeUpdate", "eks:DeleteNodegroup", *TAGS_EKS,
    ),
    # internal/service/eks/access_entry.go and access_policy_association.go
    "aws:eks/accessEntry:AccessEntry": (
        "eks:CreateAccessEntry", "eks:DescribeAccessEntry", "eks:UpdateAccessEntry", "eks:DeleteAccessEntry", *TAGS_EKS,
    ),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        "eks:AssociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "eks:DisassociateAccessPolicy",
    ),
    # internal/service/eks/pod_identity_association.go
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": (
        "eks:CreatePodIdentityAssociation", "eks:DescribePodIdentityAssociation", "eks:UpdatePodIdentityAssociation",
        "eks:DeletePodIdentityAssociation", *TAGS_EKS,
    ),
    # internal/service/ecr/repository.go: the read lists the repository's tags.
    "aws:ecr/repository:Repository": (
        "ecr:CreateRepository", "ecr:DescribeRepositories", "ecr:ListTagsForResource", "ecr:PutImageScanningConfiguration",
        "ecr:PutImageTagMutability", "ecr:TagResource", "ecr:UntagResource", "ecr:DeleteRepository",
    ),
    # internal/service/ecr/lifecycle_policy.go
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": (
        "ecr:PutLifecyclePolicy", "ecr:GetLifecyclePolicy", "ecr:DeleteLifecyclePolicy",
    ),
    # pulumi/pulumi-docker-build: a pushed image is uploaded layer by layer, its manifest put, and
    # read back for its digest (the ECR User Guide's "Required IAM permissions for pushing an image").
    "docker-build:index:Image": (
        "ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart", "ecr:CompleteLayerUpload",
        "ecr:PutImage", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
    ),
    # internal/service/fsx/lustre_file_system.go: tags are listed and set through FSx's tag API;
    # CreateFileSystem's dependent action reads the VPC's security groups, and a delete with
    # storage.fsx.backups takes a final backup (CreateBackup).
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        "fsx:CreateFileSystem", "fsx:DescribeFileSystems", "fsx:UpdateFileSystem", "fsx:DeleteFileSystem",
        "fsx:CreateBackup", "ec2:GetSecurityGroupsForVpc", "fsx:ListTagsForResource", "fsx:TagResource",
        "fsx:UntagResource",
    ),
    # internal/service/fsx/data_repository_association.go
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fsx:CreateDataRepositoryAssociation", "fsx:DescribeDataRepositoryAssociations",
        "fsx:UpdateDataRepositoryAssociation", "fsx:DeleteDataRepositoryAssociation", "fsx:ListTagsForResource",
        "fsx:TagResource", "fsx:UntagResource",
    ),
    # internal/service/sqs/queue.go: attributes and tags are read and set apart.
    "aws:sqs/queue:Queue": (
        "sqs:CreateQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:ListQueueTags",
        "sqs:TagQueue", "sqs:UntagQueue", "sqs:DeleteQueue",
    ),
    # internal/service/sqs/queue_policy.go: the policy is the queue's Policy attribute.
    "aws:sqs/queuePolicy:QueuePolicy": ("sqs:GetQueueAttributes", "sqs:SetQueueAttributes"),
    # internal/service/events/rule.go and target.go
    "aws:cloudwatch/eventRule:EventRule": (
        "events:PutRule", "events:DescribeRule", "events:EnableRule", "events:DisableRule", "events:ListTagsForResource",
        "events:TagResource", "events:UntagResource", "events:DeleteRule",
    ),
    "aws:cloudwatch/eventTarget:EventTarget": ("events:PutTargets", "events:ListTargetsByRule", "events:RemoveTargets"),
}
"""The actions each AWS resource type's create, read, update, tag and delete make."""

REMOTE_CHILDREN: Mapping[str, tuple[str, ...]] = {
    # pulumi/pulumi-eks, nodejs/eks/cluster/cluster.ts: the cluster's service role ``<name>-eksRole``
    # with AmazonEKSClusterPolicy attached, the cluster, and the kube-proxy and vpc-cni add-ons (the
    # library passes skipDefaultNodeGroup, skipDefaultSecurityGroups and createOidcProvider false, so
    # no instance role, security group or OIDC provider).
    "eks:index:Cluster": (
        "aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:eks/cluster:Cluster",
        "aws:eks/addon:Addon",
    ),
}
"""Multi-language components whose children their own provider creates, so the program's graph
does not list them: the resource types they register."""

REMOTE_READS: Mapping[str, tuple[str, ...]] = {
    # cluster/cluster.ts and addons/cni-addon.ts: the kube-proxy and vpc-cni add-ons' default versions.
    "eks:index:Cluster": ("aws:eks/getAddonVersion:getAddonVersion",),
}
"""The provider functions those components call."""

REMOTE_ROLES: Mapping[str, tuple[str, ...]] = {
    # servicerole.ts: ServiceRole ``<name>-eksRole`` registers its role as ``<name>-eksRole-role``.
    "eks:index:Cluster": ("{name}-eksRole-role",),
}
"""The resource names of the IAM roles those components register, ``{name}`` the component's."""

READ_ACTIONS: Mapping[str, tuple[str, ...]] = {
    # internal/service/iam/session_context_data_source.go: an assumed-role session's role is read
    # (GetRole) to give its ARN with its path: the deployer's own role, at the first preview.
    "aws:iam/getSessionContext:getSessionContext": ("iam:GetRole",),
    # internal/service/eks/clusters_data_source.go, cluster_data_source.go
    "aws:eks/getClusters:getClusters": ("eks:ListClusters",),
    "aws:eks/getCluster:getCluster": ("eks:DescribeCluster",),
    # internal/service/eks/node_groups_data_source.go, node_group_data_source.go
    "aws:eks/getNodeGroups:getNodeGroups": ("eks:ListNodegroups",),
    "aws:eks/getNodeGroup:getNodeGroup": ("eks:DescribeNodegroup",),
    # internal/service/eks/addon_version_data_source.go, addon_data_source.go
    "aws:eks/getAddonVersion:getAddonVersion": ("eks:DescribeAddonVersions",),
    "aws:eks/getAddon:getAddon": ("eks:DescribeAddon",),
    # internal/service/ec2/vpc_subnet_data_source.go: an adopted network's subnets' CIDRs.
    "aws:ec2/getSubnet:getSubnet": ("ec2:DescribeSubnets",),
    # internal/service/ec2/ec2_launch_template_data_source.go
    "aws:ec2/getLaunchTemplate:getLaunchTemplate": ("ec2:DescribeLaunchTemplates", "ec2:DescribeLaunchTemplateVersions"),
    # internal/service/ecr/authorization_token_data_source.go: the registry login for a push.
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": ("ecr:GetAuthorizationToken",),
    # internal/service/ecr/repositories_data_source.go, images_data_source.go
    "aws:ecr/getRepositories:getRepositories": ("ecr:DescribeRepositories",),
    "aws:ecr/getImages:getImages": ("ecr:ListImages",),
    # GetCallerIdentity needs no permission (STS API reference); getPartition and getRegion answer
    # from the provider's own configuration.
    "aws:index/getCallerIdentity:getCallerIdentity": (),
    "aws:index/getPartition:getPartition": (),
    "aws:index/getRegion:getRegion": (),
}
"""The actions each provider function (data source) the program calls needs."""

FOLLOWING_READS: Mapping[str, tuple[str, ...]] = {
    # aws.node_group_sizes / node_group_rolls / cluster_access: once the cluster runs, its node
    # groups and their launch templates are read too.
    "aws:eks/getClusters:getClusters": (
        "aws:eks/getCluster:getCluster", "aws:eks/getNodeGroups:getNodeGroups", "aws:eks/getNodeGroup:getNodeGroup",
        "aws:ec2/getLaunchTemplate:getLaunchTemplate",
    ),
}
"""Reads a first preview makes whose answers lead to further reads on the next one (a running cluster)."""

ECR_IMAGE_READS = ("aws:ecr/getRepositories:getRepositories", "aws:ecr/getImages:getImages")
"""The reads of images the stack names in the deployer's own ECR (``platform.image_presence``)."""

ROLE_PASSING_TYPES: Mapping[str, str] = {
    "aws:eks/cluster:Cluster": "the cluster's service role (CreateCluster roleArn)",
    "aws:eks/nodeGroup:NodeGroup": "the node role (CreateNodegroup nodeRole)",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": "the pods' role (CreatePodIdentityAssociation roleArn)",
    "aws:eks/addon:Addon": "an add-on's Pod Identity role (CreateAddon podIdentityAssociations)",
}
"""Resources whose create hands a role to a service, which needs ``iam:PassRole`` on that role (IAM
User Guide, "Granting a user permissions to pass a role to an AWS service")."""

SERVICE_LINKED_ROLES: Mapping[str, tuple[str, ...]] = {
    # EKS User Guide, "Using roles for Amazon EKS clusters" and "Using roles for Amazon EKS node groups".
    "aws:eks/cluster:Cluster": ("eks.amazonaws.com",),
    "aws:eks/nodeGroup:NodeGroup": ("eks-nodegroup.amazonaws.com",),
    # FSx for Lustre User Guide, "Using service-linked roles for Amazon FSx": the file system's, and
    # the S3 data repository's.
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fsx.amazonaws.com",),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("s3.data-source.lustre.fsx.amazonaws.com",),
}
"""The service-linked roles a resource's service creates at its first create in an account, which
needs ``iam:CreateServiceLinkedRole`` for that service from the caller."""

PERMISSION_ONLY_ACTIONS = frozenset({"iam:PassRole"})
"""Actions that no API operation is named after: IAM checks them inside another call (PassRole in
the call that hands a role to a service)."""
