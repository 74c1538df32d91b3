"""A throwaway certificate authority for the local control plane: made fresh for every start, never reused."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=2)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


class Authority:
    """Issues the serving and client certificates of one control plane, all written below `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name("nsscaler-test-ca"))
            .issuer_name(_name("nsscaler-test-ca"))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.ca_cert = folder / "ca.crt"
        self.ca_cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(folder / "ca.key", self._key)

    @classmethod
    def load(cls, folder: Path) -> Authority:
        """The authority of a running control plane, to issue one more certificate (e.g. a test proxy's)."""
        authority = cls.__new__(cls)
        authority.folder = folder
        authority.ca_cert = folder / "ca.crt"
        authority._cert = x509.load_pem_x509_certificate(authority.ca_cert.read_bytes())
        key = serialization.load_pem_private_key((folder / "ca.key").read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        authority._key = key
        return authority

    def issue(self, stem: str, *, common_name: str, organization: str | None = None,
              server: bool = False, extra_ips: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """Write `<stem>.crt` and `<stem>.key`; a server certificate is valid for loopback (and `extra_ips`,
        e.g. a node's address and the `kubernetes` Service's ClusterIP, which Pods connect to)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organization))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc"),
                x509.DNSName("kubernetes.default.svc.cluster.local"),
                *(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", *extra_ips)),
            ]), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path, key_path = self.folder / f"{stem}.crt", self.folder / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert_path, key_path

    def service_account_keys(self) -> tuple[Path, Path]:
        """The RSA pair that signs ServiceAccount tokens (private for signing, public for verifying)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private, public = self.folder / "sa.key", self.folder / "sa.pub"
        _write_key(private, key)
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
        return private, public
